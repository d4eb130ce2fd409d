package lab

// A real SSH service for the exception-path tests: an SSH server (golang.org/x/crypto/ssh)
// listening inside a lab namespace, reached with the OpenSSH client binary from another
// namespace. The server accepts one public key and answers every "exec" request with a
// fixed line naming itself and the client address it saw; it runs no command.

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHKey is a client key pair; PrivateKeyFile is an OpenSSH private key file for `ssh -i`.
type SSHKey struct {
	Public         ssh.PublicKey
	PrivateKeyFile string
}

// NewSSHKey makes an Ed25519 client key and writes its private half (mode 0600) into dir.
func NewSSHKey(dir string) (*SSHKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "ilb lab")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return &SSHKey{Public: sshPub, PrivateKeyFile: path}, nil
}

// SSHServer is an SSH service in a lab namespace.
type SSHServer struct {
	name string
	ln   net.Listener
	wg   sync.WaitGroup
}

// ServeSSHIn starts an SSH server named name on addr ("ip:port") inside namespace nsName,
// accepting only key.
func (l *Lab) ServeSSHIn(nsName, addr, name string, key ssh.PublicKey) (*SSHServer, error) {
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return nil, err
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == string(key.Marshal()) {
				return nil, nil
			}
			return nil, fmt.Errorf("unknown key")
		},
	}
	cfg.AddHostKey(signer)
	s := &SSHServer{name: name}
	if err := l.InNamespace(nsName, func() (err error) {
		s.ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c, cfg)
			}()
		}
	}()
	return s, nil
}

// serve runs one SSH connection, bounded in time.
func (s *SSHServer) serve(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	conn, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		for req := range chReqs {
			if req.Type != "exec" {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Fprintf(ch, "ssh-ok %s %s\n", s.name, host)
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
			ch.Close()
			break
		}
	}
}

// Close stops the server and waits for its connections to end.
func (s *SSHServer) Close() {
	s.ln.Close()
	s.wg.Wait()
}

// SSHFrom runs the OpenSSH client inside namespace nsName against addr with key, asking
// for a command, and returns what it printed.
func (l *Lab) SSHFrom(nsName, addr string, key *SSHKey, timeout time.Duration) (string, error) {
	return l.RunIn(nsName, timeout, "ssh", "-F", "/dev/null", "-i", key.PrivateKeyFile,
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10", "root@"+addr, "check")
}
