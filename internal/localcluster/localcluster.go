// Package localcluster runs real `strand serve` processes (and other
// strand commands) on 127.0.0.1: free ports, a child process whose output
// goes to a file, its end, its CPU time and memory. `strand bench cluster`
// and cmd/strand's real-process tests start their clusters with it, so
// the two cannot drift apart in how a port is chosen or a server stopped.
package localcluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Ports are drawn below Linux's ephemeral range (32768-60999 by default):
// a port the kernel hands to some other process's connect or listen(:0)
// comes from that range, so it cannot take one of ours between the probe
// here and the process's own listen (seen as "address already in use"
// with ports from listen(:0)).
const (
	PortMin  = 20000
	PortSpan = 12000
)

// FreePorts returns n distinct ports free on 127.0.0.1 right now, in
// PortMin..PortMin+PortSpan, in random order.
func FreePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for attempt := 0; len(ports) < n; attempt++ {
		if attempt == 1000 {
			return nil, fmt.Errorf("localcluster: no %d free ports on 127.0.0.1 in %d..%d", n, PortMin, PortMin+PortSpan)
		}
		port := PortMin + rand.IntN(PortSpan)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // taken
		}
		lns = append(lns, ln)
		ports = append(ports, port)
	}
	return ports, nil
}

// Addrs are the 127.0.0.1 addresses of ports.
func Addrs(ports []int) []string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return out
}

// Peers is `strand serve --peers` for nodes 1..len(addrs) at addrs:
// "1=ADDR,2=ADDR,...".
func Peers(addrs []string) string {
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		parts[i] = fmt.Sprintf("%d=%s", i+1, a)
	}
	return strings.Join(parts, ",")
}

// Proc is one running process, its stdout and stderr appended to Log.
type Proc struct {
	Cmd  *exec.Cmd
	Log  string
	done chan struct{}
	err  error
}

// Start starts binary with args and env added to this process's
// environment; its output is appended to logPath (created, with its
// directory, when missing), so a restarted node keeps one log.
func Start(binary, logPath string, env []string, args ...string) (*Proc, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("localcluster: start %s: %w", binary, err)
	}
	p := &Proc{Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process exited (exec's Wait error); read it after Done.
func (p *Proc) Err() error { return p.err }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() {
	p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends sig and waits up to within for the exit, then kills; it
// returns the exit error, or an error saying the process did not exit in
// time.
func (p *Proc) Stop(sig os.Signal, within time.Duration) error {
	p.Cmd.Process.Signal(sig)
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-p.done:
		return p.err
	case <-t.C:
		p.Kill()
		return fmt.Errorf("localcluster: %s did not exit within %v of %v", filepath.Base(p.Cmd.Path), within, sig)
	}
}

// StopAll stops every process as Stop does, signalling them all first so
// they stop in parallel.
func StopAll(procs []*Proc, sig os.Signal, within time.Duration) error {
	for _, p := range procs {
		p.Cmd.Process.Signal(sig)
	}
	var errs []error
	for i, p := range procs {
		t := time.NewTimer(within)
		select {
		case <-p.done:
		case <-t.C:
			p.Kill()
			errs = append(errs, fmt.Errorf("localcluster: process %d (%s) did not stop within %v of %v", i+1, p.Log, within, sig))
		}
		t.Stop()
	}
	return errors.Join(errs...)
}

// LogTail is the last n bytes of the file at path ("" when unreadable).
func LogTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Sample is a process's CPU time so far and its resident memory.
type Sample struct {
	CPU      time.Duration // user + system
	RSSBytes int64
}

// SampleOf reads process pid's /proc/PID/stat; zero when it cannot.
func SampleOf(pid int) Sample {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return Sample{}
	}
	st, err := p.Stat()
	if err != nil {
		return Sample{}
	}
	return Sample{CPU: time.Duration(st.CPUTime() * float64(time.Second)), RSSBytes: int64(st.ResidentMemory())}
}
