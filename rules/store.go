package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Store keeps the configuration durably in one JSON file. A save never leaves a half-written
// file behind: it writes a temporary file in the same directory, fsyncs it, renames it over
// the old one and fsyncs the directory, so a crash at any point leaves the old or the new file.
type Store struct {
	Path string
}

// storeVersion is written into the file so a future format change can be detected.
const storeVersion = 1

type storeFile struct {
	Version int    `json:"version"`
	Config  Config `json:"config"`
}

// Load reads the configuration; a missing file is an empty configuration.
func (s *Store) Load() (Config, error) {
	data, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, err
	}
	var f storeFile
	if err := json.Unmarshal(data, &f); err != nil {
		return Config{}, fmt.Errorf("%s: %w", s.Path, err)
	}
	if f.Version != storeVersion {
		return Config{}, fmt.Errorf("%s: unsupported version %d", s.Path, f.Version)
	}
	return f.Config, nil
}

// Save replaces the stored configuration atomically and durably.
func (s *Store) Save(c *Config) error {
	data, err := json.MarshalIndent(storeFile{Version: storeVersion, Config: *c}, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	dir := filepath.Dir(s.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(s.Path)+".tmp*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		return err
	}
	ok = true
	// The rename is only durable once the directory entry is on disk.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
