package config

import (
	"cmp"
	"path"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
)

// Speaker types: the names of the registry's entries (SpeakerKinds), as
// speaker.type is written.
const (
	SpeakerGoBGP = "gobgp"
	SpeakerFRR   = "frr"
	// SpeakerBird is BIRD driven natively: aokeyd writes its key files and
	// reconfigures it (internal/birdnative), never touching its sockets.
	SpeakerBird = "bird"
)

// BIRD defaults.
const (
	DefaultBirdControlSocket = "/run/bird/bird.ctl"
	DefaultBirdKeysDir       = "/etc/bird/aokeyd"
	DefaultBirdBinary        = "bird"
	DefaultBirdGroup         = "bird"
	DefaultBirdProcessName   = "bird"
)

// Bird says how aokeyd drives BIRD natively (speaker.type bird).
type Bird struct {
	// ControlSocket is BIRD's control socket (birdc -s).
	ControlSocket string `yaml:"control_socket"`
	// KeysDir holds one include file per neighbor, NEIGHBOR.conf, that
	// the neighbor's protocol bgp includes; aokeyd alone writes them.
	KeysDir string `yaml:"keys_dir"`
	// Binary is the bird executable, run as `bird -p` to check each file
	// before BIRD sees it.
	Binary string `yaml:"binary"`
	// Group reads the include files (0640) and searches KeysDir (0750):
	// the group BIRD runs as, since BIRD reads its configuration and its
	// includes after dropping privileges (Debian: bird -u bird -g bird).
	// Unset: DefaultBirdGroup when that group exists, else none (0600,
	// root's alone). "root": none.
	Group string `yaml:"group"`
	// PIDFile and ProcessName find BIRD's process, whose sockets aokeyd
	// reads to verify (never writes).
	PIDFile      string   `yaml:"pid_file"`
	ProcessName  string   `yaml:"process_name"`
	PollInterval Duration `yaml:"poll_interval"`
}

// FRR defaults (bgp/frr's agree).
const (
	DefaultFRRPIDFile      = "/run/frr/bgpd.pid"
	DefaultFRRProcessName  = "bgpd"
	DefaultFRRPollInterval = time.Second
	MinFRRPollInterval     = 100 * time.Millisecond
	MaxFRRPollInterval     = time.Minute
)

// Speaker selects the BGP speaker aokeyd keys: Type names its kind (an
// entry of SpeakerKinds; gobgp, configured under the top-level gobgp
// section, by default), and only that kind's section may be set.
type Speaker struct {
	Type string `yaml:"type"`
	// API is gobgpd's API line: v3, v4, or auto (the default: detected
	// from the server at the first call that reaches it). gobgp only.
	API  string `yaml:"api"`
	FRR  *FRR   `yaml:"frr"`
	Bird *Bird  `yaml:"bird"`
}

// gobgpd's API lines (Speaker.API).
const (
	GoBGPAPIAuto = "auto"
	GoBGPAPIv3   = "v3"
	GoBGPAPIv4   = "v4"
)

// FRR says how to reach FRR's bgpd: its vty socket (bgpd.vty, the socket
// vtysh talks to), and how to find the bgpd process (its pid file; when
// that file does not exist, the one process named ProcessName).
type FRR struct {
	// VtySocket is the directory of the daemons' vty sockets (FRR's
	// --vty_socket); "" is FRR's default, /run/frr.
	VtySocket string `yaml:"vty_socket"`
	// Pathspace is FRR's -N, for an FRR started with -N.
	Pathspace   string `yaml:"pathspace"`
	PIDFile     string `yaml:"pid_file"`
	ProcessName string `yaml:"process_name"`
	// PollInterval is how often bgpd's neighbors are listed for session
	// changes: the latency of session events.
	PollInterval Duration `yaml:"poll_interval"`
}

// checkGoBGPSpeaker is gobgpd's entry's check: its API line and the
// gobgp section.
func (p *parser) checkGoBGPSpeaker(c *Config) {
	s := &c.Speaker
	switch s.API {
	case "":
		s.API = GoBGPAPIAuto
	case GoBGPAPIAuto, GoBGPAPIv3, GoBGPAPIv4:
	default:
		p.at("speaker.api", keystore.ErrInvalid, "want %s, %s or %s: gobgpd's API line", GoBGPAPIv3, GoBGPAPIv4, GoBGPAPIAuto)
	}
	p.checkGoBGP(&c.GoBGP)
}

// checkFRRSpeaker is FRR's entry's check: speaker.frr, its settings'
// defaults applied.
func (p *parser) checkFRRSpeaker(c *Config) {
	if c.Speaker.FRR == nil {
		c.Speaker.FRR = &FRR{}
	}
	p.checkFRR(c.Speaker.FRR)
}

// checkBirdSpeaker is BIRD's entry's check: speaker.bird, its settings'
// defaults applied.
func (p *parser) checkBirdSpeaker(c *Config) {
	s := &c.Speaker
	if s.Bird == nil {
		s.Bird = &Bird{}
	}
	b := s.Bird
	b.ControlSocket = cmp.Or(b.ControlSocket, DefaultBirdControlSocket)
	b.KeysDir = cmp.Or(b.KeysDir, DefaultBirdKeysDir)
	b.Binary = cmp.Or(b.Binary, DefaultBirdBinary)
	b.ProcessName = cmp.Or(b.ProcessName, DefaultBirdProcessName)
	if b.PollInterval == 0 {
		b.PollInterval = Duration(DefaultFRRPollInterval)
	}
	if d := time.Duration(b.PollInterval); d < MinFRRPollInterval || d > MaxFRRPollInterval {
		p.at("speaker.bird.poll_interval", keystore.ErrInvalid, "%s is out of range (%s..%s)", d, MinFRRPollInterval, MaxFRRPollInterval)
	}
}

// frrProcess finds FRR's bgpd: its pid file, or when that does not exist
// the one process named ProcessName. Not for an FRR started with a
// pathspace (-N): several instances run side by side then, a process scan
// cannot tell them apart, and the one bgpd it finds while this instance's
// restarts (its pid file gone) is another instance's, whose sockets are
// not aokeyd's to key. The pid file alone names it.
func frrProcess(c *Config) Process {
	f := c.Speaker.FRR
	name := f.ProcessName
	if f.Pathspace != "" {
		name = ""
	}
	return Process{PIDFile: f.PIDFile, Name: name}
}

func (p *parser) checkFRR(f *FRR) {
	if f.PIDFile == "" {
		f.PIDFile = DefaultFRRPIDFile
		if f.Pathspace != "" && !strings.ContainsAny(f.Pathspace, "/ \t") {
			// FRR under -N keeps its pid files in /run/frr/NAME (its
			// --vty_socket moves only the vty sockets).
			f.PIDFile = path.Join(path.Dir(DefaultFRRPIDFile), f.Pathspace, path.Base(DefaultFRRPIDFile))
		}
	}
	if f.ProcessName == "" {
		f.ProcessName = DefaultFRRProcessName
	}
	if strings.ContainsRune(f.ProcessName, '/') {
		p.at("speaker.frr.process_name", keystore.ErrInvalid, "a process name (comm), not a path")
	}
	if strings.ContainsAny(f.Pathspace, "/ \t") {
		p.at("speaker.frr.pathspace", keystore.ErrInvalid, "a name (FRR's -N), not a path")
	}
	switch d := time.Duration(f.PollInterval); {
	case d == 0:
		f.PollInterval = Duration(DefaultFRRPollInterval)
	case d < MinFRRPollInterval || d > MaxFRRPollInterval:
		p.at("speaker.frr.poll_interval", keystore.ErrInvalid, "%s is out of range (%s..%s; default %s)",
			d, MinFRRPollInterval, MaxFRRPollInterval, Duration(DefaultFRRPollInterval))
	}
}
