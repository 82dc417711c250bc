package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/connectguard"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/rcu"
	"github.com/aokeyd/aokeyd/internal/revocation"
	"github.com/aokeyd/aokeyd/internal/supervise"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	// The launcher re-runs this binary as the child that installs the
	// seccomp filter and execs the BGP daemon; it never returns then.
	connectguard.RunChildIfRequested()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is aokeyd on this machine (systemHost).
func run(args []string, stdout, stderr io.Writer) int { return systemHost().run(args, stdout, stderr) }

func (h host) run(args []string, stdout, stderr io.Writer) int {
	// A first argument that is no flag is a subcommand: an unknown one is
	// refused, never taken as the daemon's (which takes flags only).
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "init":
			return cmdInit(args[1:], stdout, stderr)
		case "exec":
			return cmdExec(args[1:], stdout, stderr)
		case "version", "help":
			if len(args) > 1 {
				fmt.Fprintf(stderr, "aokeyd %s: unexpected argument %q\n", args[0], args[1])
				return 2
			}
			if args[0] == "help" {
				printUsage(stdout)
			} else {
				fmt.Fprintln(stdout, "aokeyd", version)
			}
			return 0
		case "man": // hidden: the package build writes aokeyd(8) with it
			return cmdMan(args[1:], stderr)
		}
		fmt.Fprintf(stderr, "aokeyd: unknown command %q: the commands are init, exec, version and help, and the daemon takes flags only (aokeyd help; aoctl is the operator's CLI)\n", args[0])
		return 2
	}
	fs, o := daemonFlags()
	if code, done := parseFlags(fs, args, printUsage, stdout, stderr); done {
		return code
	}
	if o.version {
		fmt.Fprintln(stdout, "aokeyd", version)
		return 0
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "aokeyd: unexpected argument %q: the daemon takes flags only (aokeyd help)\n", fs.Arg(0))
		return 2
	}
	profileOnSignal(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := h.serve(ctx, o.config, o.stateDir, o.guard, o.roll, o.resync, stderr); err != nil {
		fmt.Fprintln(stderr, "aokeyd:", err)
		return 1
	}
	return 0
}

// parseFlags parses args into fs. -h, -help and --help print usage on
// stdout (exit status 0); a flag error is printed on stderr with a
// pointer to the usage (exit status 2). done says whether the caller
// returns code.
func parseFlags(fs *flag.FlagSet, args []string, usage func(io.Writer), stdout, stderr io.Writer) (code int, done bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage(stdout)
		return 0, true
	case err != nil:
		hint := fs.Name() + " -help"
		if fs.Name() == "aokeyd" {
			hint = "aokeyd help"
		}
		fmt.Fprintf(stderr, "run %s for usage\n", hint)
		return 2, true
	}
	return 0, false
}

func newLogger(c config.Log, w io.Writer) (*slog.Logger, error) {
	lvl, err := c.SlogLevel()
	if err != nil {
		return nil, err
	}
	// The level is a LevelVar a reload sets (setLogLevel).
	lv := new(slog.LevelVar)
	lv.Set(lvl)
	o := &slog.HandlerOptions{Level: lv}
	if c.Format == "json" {
		return slog.New(leveled{slog.NewJSONHandler(w, o), lv}), nil
	}
	return slog.New(leveled{slog.NewTextHandler(w, o), lv}), nil
}

// host is what aokeyd asks of the machine it runs on: the process
// hardening and the kernel probes that serve runs before reading
// anything, and the kernel's release. Tests run aokeyd on a host of their
// own (a machine without TCP-AO, a kernel release with a known defect);
// aokeyd runs on systemHost.
type host struct {
	harden          func() error
	probeKernel     func() error
	probeAlgorithms func() map[tcpao.Algorithm]error
	uname           func() string
}

// systemHost is this machine.
func systemHost() host {
	return host{harden: harden, probeKernel: tcpao.Probe, probeAlgorithms: tcpao.ProbeAlgorithms, uname: tcpao.UnameRelease}
}

func (h host) serve(ctx context.Context, cfgPath, stateDir, guardSock string, rc rotator.Config, resync time.Duration, logw io.Writer) error {
	// Refused before anything is written: the state directory, the
	// fingerprint key, a speaker's files.
	checked, log, err := h.start(ctx, cfgPath, stateDir, logw)
	if err != nil {
		return err
	}
	cfg := checked.Config
	rc.NoPeerProbe = !cfg.Kernel.KeepaliveProbe.On()
	src, err := cfg.OpenKeySource(config.SourceOptions{Logger: log})
	if err != nil {
		return err
	}
	defer src.Close()
	cache := keystore.NewCache(src, keystore.CacheOptions{Logger: log})
	defer cache.Close()

	reg := prometheus.NewRegistry()
	// The Go runtime's and the process's own series (go_goroutines,
	// process_resident_memory_bytes, ...): what an operator (and the
	// chaos run's leak check) watches a long-lived daemon by.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg, metrics.Options{PerKey: cfg.Metrics.PerKey.On()})
	if err != nil {
		return err
	}
	kind := cfg.SpeakerKind()
	// Opened whatever the setting: a value a crash left recorded is put
	// back even when the setting was turned off since.
	exp, err := rcu.Open(rcu.SysfsPath, filepath.Join(stateDir, rcu.RecordName), log)
	if err != nil {
		return fmt.Errorf("kernel.expedite_rcu: %w", err)
	}
	if !cfg.Kernel.ExpediteRCU {
		exp = nil
	}
	fw := &fleetWaker{}
	o := daemon.Options{
		Policy:          checked.Policy,
		Keys:            cache,
		Source:          src,
		Kind:            kind.Kind,
		Rotator:         rc,
		ListenPort:      kind.Port,
		Refresh:         time.Duration(cfg.KeySource.Refresh),
		Resync:          resync,
		StaleAfter:      time.Duration(cfg.KeySource.StaleAfter),
		RevocationsFile: filepath.Join(stateDir, revocation.File),
		OwnedKeysFile:   filepath.Join(stateDir, "owned-keys.json"),
		CarriedKeysFile: filepath.Join(stateDir, "carried-keys.json"),
		EarlyRollsFile:  filepath.Join(stateDir, "early-rolls.json"),
		MigrationsFile:  filepath.Join(stateDir, "migrations.json"),
		Kernel:          h.kernel(log),
		Logger:          log,
		Metrics:         m,
		Changed:         fw.Wake,
		Expedite:        exp.Hold,
	}
	var started []any
	switch kind.Opens() {
	case config.OpensExecutor:
		// The speaker keys its own sockets: the daemon's pass plans its
		// lists and the executor carries them (issue 50 item 1).
		open, ok := executors[kind]
		if !ok {
			return fmt.Errorf("speaker.type %s has no executor", kind.Name)
		}
		ex, err := open(cfg, log, m, exp)
		if err != nil {
			return err
		}
		o.Executor = ex
		started = []any{"speaker", ex.Name(), "executor", true}
	default:
		sp, closer, err := openSpeaker(cfg, log, m)
		if err != nil {
			return err
		}
		defer closer.Close()
		o.Speaker, o.Discoverer, o.ActiveOpens = sp, sockets.System{}, guardSock != ""
		if cfg.Kernel.RaiseOptmem {
			o.RaiseOptMem = tcpao.RaiseOptMemIn
		}
		started = []any{"speaker", sp.Name()}
	}
	d, err := daemon.New(o)
	if err != nil {
		return err
	}

	var extra []supervise.Runnable
	if guardSock != "" && o.Executor == nil {
		extra = append(extra, supervise.Runnable{Name: "connect-supervisor", Run: func(ctx context.Context) error {
			superviseConnects(ctx, guardSock, d, log)
			return nil
		}})
	}
	return h.superviseCore(ctx, cfg, checked.Policy, cfgPath, src, m, reg, log, d, fw, extra, started...)
}

// superviseCore runs the daemon d (the piece "reconcile") with the control API,
// the metrics listener, the reload watcher, the fleet publisher and the
// Vault token's renewal when configured, and extra, until ctx ends.
// Started in this order, stopped in the reverse one: extra and the reload
// watcher first, then the listeners, then the core (keys stay
// installed), the key source's renewal last. SIGHUP is caught from before
// READY=1: its default action ends the process.
func (h host) superviseCore(ctx context.Context, cfg *config.Config, pol *policy.Policy, cfgPath string, src keystore.Source, m *metrics.Metrics,
	reg prometheus.Registerer, log *slog.Logger, d *daemon.Daemon, fw *fleetWaker, extra []supervise.Runnable, started ...any) error {
	control, err := controlAPI(cfg, d, m, log)
	if err != nil {
		return err
	}
	metricsHTTP, err := metricsListener(cfg.Metrics, m.Handler())
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	pieces := []supervise.Runnable{{Name: "reconcile", Run: d.Run}, control, metricsHTTP,
		{Name: "reload", Run: func(ctx context.Context) error { h.watchReload(ctx, hup, cfgPath, cfg, d, log); return nil }}}
	if v, ok := src.(*keystore.VaultSource); ok {
		if cfg.Fleet != nil {
			fp, err := fleetPublisher(cfg, pol.Safety().SwitchTimeout, v, d, fw, reg, log)
			if err != nil {
				return err
			}
			pieces = append(pieces, fp)
		}
		pieces = append([]supervise.Runnable{{Name: "vault-token", Run: v.Run}}, pieces...)
	}
	pieces = append(pieces, extra...)
	log.Info("aokeyd started", append([]any{"version", version, "key_source", src.Name(), "control", cfg.Control.Socket}, started...)...)
	notify("READY=1")
	err = supervise.Run(ctx, log, stopTimeout, pieces...)
	notify("STOPPING=1")
	return err
}

// checkReadTimeout bounds the start's and a reload's read of the key
// source: a Vault that accepts and never answers is waited for like one
// that is down, not before READY=1 (the speakers' units start after
// aokeyd's).
const checkReadTimeout = 10 * time.Second

// checkOptions are the start's and a reload's: everything aoctl validate
// checks, this machine's kernel and VRF devices included.
func (h host) checkOptions(log *slog.Logger) config.CheckOptions {
	return config.CheckOptions{VRFDevice: config.LocalVRF, ReadTimeout: checkReadTimeout, Logger: log,
		Algorithms: func() (map[tcpao.Algorithm]error, string) { return h.probeAlgorithms(), tcpao.KernelRelease() }}
}

// startWaitsMsg is the start's one log line for a Vault key source that
// gave no answer (config.Checked.Unanswered).
const startWaitsMsg = "key source gave no answer at start: aokeyd starts and waits for it"

// start readies the process and checks everything aoctl validate checks
// before it writes anything: it hardens the process, probes the kernel for
// TCP-AO, chooses the fingerprint key (read, not written), checks the
// configuration, the policy and the keys, refusing every problem validate
// refuses in validate's words, opens the log, and only then writes the
// state directory and the fingerprint key. A kernel without CONFIG_TCP_AO
// can hold no key, and a probe that fails for any other reason (a seccomp
// filter or an LSM denying it) is no answer: either gets one clear error
// before READY=1 instead of failing every pass. The one problem of
// validate's that does not refuse the start is a Vault key source that
// gave no answer: it is logged once (startWaitsMsg) and waited for.
func (h host) start(ctx context.Context, cfgPath, stateDir string, logw io.Writer) (*config.Checked, *slog.Logger, error) {
	// Before any key is read: no same-uid reader of our memory, no core.
	if err := h.harden(); err != nil {
		return nil, nil, err
	}
	// Fail closed on any probe error: each names its cause and fix in one
	// line (ErrNoKernelSupport, *tcpao.ProbeError, ErrUnsupported).
	if err := h.probeKernel(); err != nil {
		return nil, nil, err
	}
	// Before any key is read: fingerprints under the kept key.
	fpk, err := chooseFingerprintKey(stateDir)
	if err != nil {
		return nil, nil, err
	}
	// Every problem `aoctl validate` prints refuses the start, in its
	// words (config.Checked.Refusal), but a Vault's that gave no answer;
	// nothing is written before. Its warnings (a binding's vrf: that is
	// no VRF device here, a demo key) refuse nothing and are logged, in
	// validate's words too. What the check read is wiped: the key cache
	// reads the source again as it runs.
	checked := config.Check(ctx, cfgPath, h.checkOptions(nil))
	checked.Snapshot.Zero()
	checked.Snapshot = nil
	if err := checked.Refusal(); err != nil {
		clear(fpk.key)
		return nil, nil, err
	}
	log, err := newLogger(checked.Config.Log, logw)
	if err != nil {
		clear(fpk.key)
		return nil, nil, err
	}
	if len(checked.Unanswered) > 0 {
		var ps []string
		for _, p := range checked.Unanswered {
			ps = append(ps, p.Error())
		}
		log.Warn(startWaitsMsg+"; until it answers, the keys on the sockets stay as they are, and what it then returns is checked "+
			"as on every read (a key aoctl validate rejects is logged and named by aoctl status, not a refusal)",
			"source", checked.Config.KeySource.Type, "problems", ps)
	}
	logWarnings(log, checked)
	if err := fpk.keep(); err != nil {
		return nil, nil, err
	}
	return checked, log, nil
}

// logWarnings logs each warning of a Check (aoctl validate prints the
// same as WARNING lines).
func logWarnings(log *slog.Logger, c *config.Checked) {
	for _, w := range c.Warnings {
		log.Warn("configuration warning (aoctl validate prints the same)", "warning", w.Error())
	}
}

// controlAPI listens on the configured unix socket, with the read group
// and the admin group the configuration names, and returns the piece that
// serves the control API on it until stopped (then waiting up to 2s for
// requests in flight).
func controlAPI(cfg *config.Config, d control.Backend, m *metrics.Metrics, log *slog.Logger) (supervise.Runnable, error) {
	gid, haveGID, err := cfg.ControlGroupID()
	if err != nil {
		return supervise.Runnable{}, err
	}
	adminGID, haveAdminGID, err := cfg.ControlAdminGroupID()
	if err != nil {
		return supervise.Runnable{}, err
	}
	// The socket file belongs to the read group; to the admin group when
	// there is no read group.
	sockGID, haveSockGID := gid, haveGID
	if !haveGID {
		sockGID, haveSockGID = adminGID, haveAdminGID
	}
	ln, err := control.Listen(cfg.Control.Socket, control.ListenOptions{Mode: fs.FileMode(cfg.Control.Mode), GID: sockGID, HaveGID: haveSockGID})
	if err != nil {
		return supervise.Runnable{}, err
	}
	srv := control.NewServer(control.ServerOptions{
		Backend: d, Logger: log, AllowGID: uint32(gid), HaveGID: haveGID,
		AdminGID: uint32(adminGID), HaveAdminGID: haveAdminGID,
		ReadTimeout: time.Duration(cfg.Control.ReadTimeout), IdleTimeout: time.Duration(cfg.Control.IdleTimeout),
		WriteTimeout: time.Duration(cfg.Control.WriteTimeout),
		MaxConns:     cfg.Control.MaxConnections, AdminConns: cfg.Control.AdminConnections,
		Refused: m.ControlRefused, Version: version, Started: time.Now(),
	})
	return supervise.Runnable{Name: "control", Run: func(ctx context.Context) error {
		return serveUntilDone(ctx, func() error { return srv.Serve(ln) }, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		})
	}}, nil
}

// metricsListener listens on the configured metrics address and returns
// the piece that serves h (the metrics handler) there until stopped; a piece that
// does nothing (until stopped) when metrics are off.
func metricsListener(mc config.Metrics, h http.Handler) (supervise.Runnable, error) {
	r := supervise.Runnable{Name: "metrics"}
	if !mc.Enabled() {
		r.Run = func(ctx context.Context) error { <-ctx.Done(); return nil }
		return r, nil
	}
	mln, err := net.Listen("tcp", mc.Listen)
	if err != nil {
		return r, fmt.Errorf("metrics.listen %s: %w", mc.Listen, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	r.Run = func(ctx context.Context) error {
		return serveUntilDone(ctx, func() error { return hs.Serve(mln) }, func() { _ = hs.Close() })
	}
	return r, nil
}

// serveUntilDone runs serve until it fails (its error) or ctx ends; then
// it calls shutdown and waits for serve to return (nil).
func serveUntilDone(ctx context.Context, serve func() error, shutdown func()) error {
	served := make(chan error, 1)
	go func() { served <- serve() }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown()
	<-served
	return nil
}

// notify sends a systemd readiness message when started as Type=notify.
func notify(state string) {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	_, _ = c.Write([]byte(state))
}

// cmdExec is `aokeyd exec [-socket PATH] -- gobgpd ...`: it starts the BGP
// daemon under a seccomp filter that hands each connect() and listen() to
// aokeyd (run with -connectguard PATH), so outgoing BGP connections carry
// TCP-AO keys and a BGP listener has its keys before it listens.
// It stays as a small parent that keeps the filter's listener for aokeyd
// restarts, and exits with the program's status. Usable as systemd's
// ExecStart=.
func cmdExec(args []string, stdout, stderr io.Writer) int {
	fs, sock := execFlags()
	if code, done := parseFlags(fs, args, func(w io.Writer) { subUsage(w, "exec", fs) }, stdout, stderr); done {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: aokeyd exec [-socket PATH] -- PROGRAM [ARGS]")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := connectguard.Launch(fs.Args(), connectguard.LaunchOptions{SocketPath: *sock, Logger: log}); err != nil {
		fmt.Fprintln(stderr, "aokeyd exec:", err)
		return 1
	}
	return 0
}

// superviseConnects fetches the launcher's listener and answers the
// speaker's connects with the daemon's keys, and its listens on the BGP
// port once the daemon keyed the socket as a listener (Daemon.ListenKeys),
// again after every restart of either side.
func superviseConnects(ctx context.Context, sock string, d *daemon.Daemon, log *slog.Logger) {
	for ctx.Err() == nil {
		l, err := connectguard.Fetch(ctx, sock)
		if err != nil {
			log.Warn("connect supervisor: launcher not reachable; retrying", "socket", sock, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		log.Info("connect supervisor running", "socket", sock, "pid", l.PID)
		sup := connectguard.NewSupervisor(l.FD, d.ConnectKeys, connectguard.SupervisorOptions{PID: l.PID, Logger: log, MD5: d.ConnectMD5,
			Listen: d.ListenKeys})
		if err := sup.Run(ctx); err != nil && ctx.Err() == nil {
			log.Warn("connect supervisor stopped; fetching the listener again", "err", err)
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// stopTimeout bounds an orderly shutdown: every long-lived piece has
// stopped by then, or aokeyd exits without it (keys stay installed either
// way).
const stopTimeout = 10 * time.Second

// kernel probes which TCP-AO algorithms the running kernel accepts (one
// scratch key each) and logs the answer: status shows it, and warns of a
// chain's key of an algorithm it refuses. It logs, too, each known TCP-AO
// defect of the release and what aokeyd does about it (daemon.NewKernel:
// synchronous listener deletes on an affected kernel or one it cannot
// place).
func (h host) kernel(log *slog.Logger) daemon.Kernel {
	k := daemon.NewKernel(h.uname(), h.probeAlgorithms())
	k.LogDefects(log)
	var ok, refused []string
	for _, a := range tcpao.Algorithms {
		if err := k.Algorithms[a]; err != nil {
			refused = append(refused, fmt.Sprintf("%s (%v)", a, err))
		} else {
			ok = append(ok, string(a))
		}
	}
	log.Info("kernel TCP-AO algorithms", "kernel", k.Release, "accepted", ok, "refused", refused)
	return k
}
