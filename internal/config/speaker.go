package config

import (
	"path"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
)

// Speaker types.
const (
	SpeakerGoBGP = "gobgp"
	SpeakerFRR   = "frr"
)

// FRR defaults (bgp/frr's agree).
const (
	DefaultFRRPIDFile      = "/run/frr/bgpd.pid"
	DefaultFRRProcessName  = "bgpd"
	DefaultFRRPollInterval = time.Second
	MinFRRPollInterval     = 100 * time.Millisecond
	MaxFRRPollInterval     = time.Minute
)

// Speaker selects the BGP speaker whose sockets aokeyd keys: gobgpd (the
// default, configured under the top-level gobgp section) or FRR's bgpd.
type Speaker struct {
	Type string `yaml:"type"`
	// API is gobgpd's API line: v3, v4, or auto (the default: detected
	// from the server at the first call that reaches it). gobgp only.
	API string `yaml:"api"`
	FRR *FRR   `yaml:"frr"`
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

// IsFRR reports whether the speaker is FRR.
func (c *Config) IsFRR() bool { return c.Speaker.Type == SpeakerFRR }

// SeparatesVRFs reports whether the configured speaker tells the same
// neighbor address in two VRFs apart (bgp.VRFSeparator): FRR does, gobgpd
// keys its neighbors by address alone.
func (c *Config) SeparatesVRFs() bool { return c.IsFRR() }

func (p *parser) checkSpeaker(c *Config) {
	s := &c.Speaker
	switch s.Type {
	case "":
		s.Type = SpeakerGoBGP
		fallthrough
	case SpeakerGoBGP:
		if s.FRR != nil {
			p.at("speaker.frr", keystore.ErrInvalid, "set only with speaker.type %s", SpeakerFRR)
		}
		switch s.API {
		case "":
			s.API = GoBGPAPIAuto
		case GoBGPAPIAuto, GoBGPAPIv3, GoBGPAPIv4:
		default:
			p.at("speaker.api", keystore.ErrInvalid, "%q (want %s, %s or %s: gobgpd's API line)", s.API, GoBGPAPIv3, GoBGPAPIv4, GoBGPAPIAuto)
		}
		p.checkGoBGP(&c.GoBGP)
	case SpeakerFRR:
		if c.GoBGP != (GoBGP{}) {
			p.at("gobgp", keystore.ErrInvalid, "set only with speaker.type %s (this config says %s)", SpeakerGoBGP, SpeakerFRR)
		}
		if s.API != "" {
			p.at("speaker.api", keystore.ErrInvalid, "set only with speaker.type %s (FRR has no API line to choose)", SpeakerGoBGP)
		}
		if s.FRR == nil {
			s.FRR = &FRR{}
		}
		p.checkFRR(s.FRR)
	default:
		p.at("speaker.type", keystore.ErrInvalid, "%q (want %s or %s)", s.Type, SpeakerGoBGP, SpeakerFRR)
	}
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
		p.at("speaker.frr.process_name", keystore.ErrInvalid, "%q: a process name (comm), not a path", f.ProcessName)
	}
	if strings.ContainsAny(f.Pathspace, "/ \t") {
		p.at("speaker.frr.pathspace", keystore.ErrInvalid, "%q: a name (FRR's -N), not a path", f.Pathspace)
	}
	switch d := time.Duration(f.PollInterval); {
	case d == 0:
		f.PollInterval = Duration(DefaultFRRPollInterval)
	case d < MinFRRPollInterval || d > MaxFRRPollInterval:
		p.at("speaker.frr.poll_interval", keystore.ErrInvalid, "%s is out of range (%s..%s; default %s)",
			d, MinFRRPollInterval, MaxFRRPollInterval, Duration(DefaultFRRPollInterval))
	}
}
