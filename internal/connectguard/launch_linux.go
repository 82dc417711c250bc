//go:build linux

package connectguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// childFD is the socketpair end the child inherits (ExtraFiles[0]).
const childFD = 3

// Launch runs args[0] (looked up in $PATH) with args under the connect()
// filter and stays as its tiny parent: it holds the seccomp listener and
// serves it on opts.SocketPath to every supervisor that asks (Fetch), so a
// restarted aokeyd picks it up again. It forwards SIGTERM, SIGINT, SIGHUP,
// SIGQUIT, SIGUSR1 and SIGUSR2 to the program and, when the program exits,
// exits the process with the program's status (128+signal when killed).
// It returns only when the program could not be started.
//
// The filter is installed by a re-executed copy of this binary (opts.Self,
// with ChildEnv set), which must call RunChildIfRequested first thing in
// main: Go cannot run code between fork and exec.
func Launch(args []string, opts LaunchOptions) error {
	if len(args) == 0 {
		return errors.New("connectguard: launch: no program given")
	}
	if opts.SocketPath == "" {
		return errors.New("connectguard: launch: SocketPath is required")
	}
	if _, err := nativeArch(); err != nil {
		return err
	}
	log := discard(opts.Logger)
	if opts.Self == "" {
		opts.Self = "/proc/self/exe"
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 10 * time.Second
	}
	if opts.Exit == nil {
		opts.Exit = os.Exit
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		return fmt.Errorf("connectguard: launch: %w", err)
	}

	ln, err := listenUnix(opts.SocketPath)
	if err != nil {
		return err
	}
	defer ln.Close()

	parentEnd, childEnd, err := launchPair()
	if err != nil {
		return err
	}
	defer parentEnd.Close()

	cmd := &exec.Cmd{
		Path:       opts.Self,
		Args:       append([]string{path}, args[1:]...),
		Env:        append(os.Environ(), ChildEnv+"=1"),
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{childEnd},
	}
	// Relay signals from here on, so none is lost between start and wait.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		childEnd.Close()
		return fmt.Errorf("connectguard: launch %s: %w", opts.Self, err)
	}
	childEnd.Close()
	pid := cmd.Process.Pid

	listener, err := receiveListener(parentEnd, opts.ReadyTimeout)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("connectguard: launch %s: %w", path, err)
	}
	defer unix.Close(listener)
	// The ack lets the child exec: from now on this process holds the
	// listener, so the program's connects never see ENOSYS while it lives.
	if _, err := parentEnd.Write([]byte{1}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("connectguard: launch %s: ack: %w", path, err)
	}
	log.Info("launched under connect() supervision", "program", path, "pid", pid, "socket", opts.SocketPath)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go serve(ctx, ln, listener, pid, log)

	code := relayUntilExit(cmd, sigs)
	log.Info("program exited", "pid", pid, "code", code)
	cancel()
	ln.Close()
	unix.Close(listener)
	opts.Exit(code)
	return nil
}

// launchPair is the socket pair the child hands its seccomp listener over:
// the parent's end is non-blocking (pollable, so deadlines work), the
// child's end is passed to it as fd 3.
func launchPair() (parentEnd, childEnd *os.File, err error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("connectguard: launch: socketpair: %w", err)
	}
	if err := unix.SetNonblock(pair[0], true); err != nil {
		unix.Close(pair[0])
		unix.Close(pair[1])
		return nil, nil, fmt.Errorf("connectguard: launch: %w", err)
	}
	return os.NewFile(uintptr(pair[0]), "connectguard-parent"), os.NewFile(uintptr(pair[1]), "connectguard-child"), nil
}

// relayUntilExit passes every signal from sigs on to the program until it
// exits, and returns its exit code.
func relayUntilExit(cmd *exec.Cmd, sigs <-chan os.Signal) int {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			return exitCode(cmd.ProcessState, err)
		}
	}
}

func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if c := ps.ExitCode(); c >= 0 {
		return c
	}
	_ = err
	return 1
}

// listenUnix listens on path with mode 0600, replacing a stale socket.
func listenUnix(path string) (*net.UnixListener, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("connectguard: socket path %s exists and is not a socket", path)
		}
		_ = os.Remove(path)
	}
	old := unix.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("connectguard: listen on %s: %w", path, err)
	}
	return ln, nil
}

// receiveListener reads the child's listener fd (or its error text).
func receiveListener(f *os.File, timeout time.Duration) (int, error) {
	_ = f.SetReadDeadline(time.Now().Add(timeout))
	defer f.SetReadDeadline(time.Time{})
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err != nil {
		return -1, fmt.Errorf("waiting for the child's seccomp listener: %w", err)
	}
	if rerr != nil {
		return -1, fmt.Errorf("receiving the child's seccomp listener: %w", rerr)
	}
	fds, err := parseRights(oob[:oobn])
	if err != nil {
		return -1, err
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		if n == 0 {
			return -1, errors.New("the child exited before installing the filter")
		}
		return -1, fmt.Errorf("child: %s", buf[:n])
	}
	return fds[0], nil
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("%w: control message: %w", ErrProtocol, err)
	}
	var fds []int
	for _, m := range msgs {
		r, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, r...)
	}
	return fds, nil
}

// RunChildIfRequested is the filter-installing child of Launch. When ChildEnv
// is set it never returns: on one locked OS thread it sets no_new_privs,
// installs the filter, sends the listener fd to the parent, waits for its
// ack and execs the program from that same thread (only the exec-ing
// thread's filter survives exec). Without ChildEnv it returns at once.
// Call it first thing in main (and in TestMain of tests that Launch).
func RunChildIfRequested() {
	if os.Getenv(ChildEnv) == "" {
		return
	}
	runtime.LockOSThread() // never unlocked: this thread execs
	os.Unsetenv(ChildEnv)
	err := child()
	fmt.Fprintf(os.Stderr, "aokeyd exec: %v\n", err)
	os.Exit(127)
}

func child() error {
	sock := childFD
	if len(os.Args) == 0 {
		return errors.New("no program")
	}
	path := os.Args[0]
	fail := func(err error) error {
		_, _ = unix.Write(sock, []byte(err.Error()))
		return err
	}
	listener, err := installFilter()
	if err != nil {
		return fail(err)
	}
	if err := unix.Sendmsg(sock, []byte("listener"), unix.UnixRights(listener), nil, 0); err != nil {
		return fmt.Errorf("send listener to the launcher: %w", err)
	}
	unix.Close(listener)
	ack := make([]byte, 1)
	if n, err := unix.Read(sock, ack); err != nil || n != 1 {
		return fmt.Errorf("the launcher did not take the listener (%d, %v)", n, err)
	}
	unix.Close(sock)
	return fmt.Errorf("exec %s: %w", path, syscall.Exec(path, os.Args, os.Environ()))
}

// The holder protocol: a supervisor connects to the socket, the holder
// checks its credentials (root or the holder's own uid) and sends one
// message "aokeyd-connectguard 1 pid=<pid>\n" with the listener fd attached
// (SCM_RIGHTS), then closes the connection.
const greeting = "aokeyd-connectguard 1 pid="

func serve(ctx context.Context, ln *net.UnixListener, listener, pid int, log *slog.Logger) {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				log.Warn("accept on the listener socket", "err", err)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return
		}
		if err := give(c, listener, pid); err != nil {
			log.Warn("serving the seccomp listener", "err", err)
		} else {
			log.Info("seccomp listener handed to a supervisor")
		}
		c.Close()
	}
}

func give(c *net.UnixConn, listener, pid int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Geteuid() {
		return fmt.Errorf("refused uid %d (pid %d)", cred.Uid, cred.Pid)
	}
	_, _, err = c.WriteMsgUnix([]byte(greeting+strconv.Itoa(pid)+"\n"), unix.UnixRights(listener), nil)
	return err
}

// Fetch asks the holder (Launch) on socketPath for the listener. The caller
// owns Listener.FD (NewSupervisor takes it over).
func Fetch(ctx context.Context, socketPath string) (Listener, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return Listener{}, fmt.Errorf("connectguard: fetch listener from %s: %w", socketPath, err)
	}
	defer conn.Close()
	c := conn.(*net.UnixConn)
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetReadDeadline(dl)
	}
	buf := make([]byte, 128)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil && !errors.Is(err, io.EOF) {
		return Listener{}, fmt.Errorf("connectguard: fetch listener from %s: %w", socketPath, err)
	}
	fds, err := parseRights(oob[:oobn])
	if err != nil {
		return Listener{}, err
	}
	rest, ok := strings.CutPrefix(string(buf[:n]), greeting)
	pid, perr := strconv.Atoi(strings.TrimSuffix(rest, "\n"))
	if len(fds) != 1 || !ok || perr != nil || pid <= 0 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return Listener{}, fmt.Errorf("%w: %s: %q with %d fds", ErrProtocol, socketPath, buf[:n], len(fds))
	}
	unix.CloseOnExec(fds[0])
	return Listener{FD: fds[0], PID: pid}, nil
}
