package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ilbgo/ilb/compat"
)

// Peer is the identity of a connected client, from the socket's peer credentials
// (SO_PEERCRED), which the client cannot forge.
type Peer struct {
	PID      int32
	UID, GID uint32
}

// Handler answers one request from an authenticated peer.
type Handler func(peer Peer, req *Request) *Response

// Listen creates the control socket at path, replacing a leftover one from a previous run.
// The socket is world-connectable (as on Solaris): reads are for anyone, and changes are
// authorized per request from the peer credentials.
func Listen(path string) (*net.UnixListener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Serve accepts connections until l is closed, answering requests one at a time per
// connection. It returns when the listener fails (net.ErrClosed after Close).
func Serve(l *net.UnixListener, h Handler) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := l.AcceptUnix()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveConn(conn, h)
		}()
	}
}

// Limits of one client connection.
const (
	maxRequest  = 1 << 20 // bytes in one request (a rule, a server, a name: far less)
	idleTimeout = 10 * time.Minute
)

func serveConn(conn *net.UnixConn, h Handler) {
	defer conn.Close()
	peer, err := peerOf(conn)
	if err != nil {
		return
	}
	// Anyone may connect, so a connection is bounded: one request line of at most
	// maxRequest bytes, and idleTimeout between requests.
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), maxRequest)
	enc := json.NewEncoder(conn)
	for {
		conn.SetReadDeadline(time.Now().Add(idleTimeout))
		if !sc.Scan() {
			return
		}
		var req Request
		var resp *Response
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			resp = &Response{Status: compat.StatusInvalCmd}
		} else {
			resp = h(peer, &req)
		}
		if err := enc.Encode(resp); err != nil {
			return
		}
	}
}

func peerOf(conn *net.UnixConn) (Peer, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if credErr != nil {
		return Peer{}, credErr
	}
	return Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}
