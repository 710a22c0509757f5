package devenv

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// LinkProxy forwards a replica's replication link to its master over
// loopback and can hold back what the master sends, as a slow network
// does: the failover tests need writes the master acknowledged and its
// replica never received, which a replica on loopback gets within
// microseconds (even a stopped one: the kernel buffers them for it).
type LinkProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	held  bool
	conns []net.Conn
	wake  *sync.Cond
}

// NewLinkProxy listens on a free loopback port and forwards every
// connection to target.
func NewLinkProxy(target string) (*LinkProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("devenv: link proxy: %w", err)
	}
	p := &LinkProxy{ln: ln, target: target}
	p.wake = sync.NewCond(&p.mu)
	go p.accept()
	return p, nil
}

// Port is the port replicas connect to instead of the master's.
func (p *LinkProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Hold stops forwarding what the master sends until Release; it stays in
// the proxy. The replica's acknowledgements still go through, so the
// master sees its replica connected but behind.
func (p *LinkProxy) Hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// Release forwards again, the held bytes first.
func (p *LinkProxy) Release() {
	p.mu.Lock()
	p.held = false
	p.wake.Broadcast()
	p.mu.Unlock()
}

// Close stops listening and drops every connection, and what was held
// with them: it never reaches the replica.
func (p *LinkProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.held = false
	p.wake.Broadcast()
	p.mu.Unlock()
	return err
}

func (p *LinkProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pipe(in, out, false) // replica -> master: acknowledgements, never held
		go p.pipe(out, in, true)  // master -> replica: the replication stream
	}
}

// pipe copies src to dst, waiting while the proxy holds when holdable.
func (p *LinkProxy) pipe(src, dst net.Conn, holdable bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && holdable {
			p.mu.Lock()
			for p.held {
				p.wake.Wait()
			}
			p.mu.Unlock()
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = src.Close()
			}
			return
		}
	}
}
