package config

import (
	"strings"

	"github.com/aokeyd/aokeyd/internal/speakers"
	"github.com/aokeyd/aokeyd/keystore"
)

// SpeakerKind is one kind of BGP speaker aokeyd keys: its entry in the
// registry, SpeakerKinds. Everything aokeyd decides by the kind of speaker
// is read from the entry: the sections a config may set and how they are
// checked, the bindings and keys the speaker can hold (Caps), how it is
// opened, how its process is found, its port. The kind's name is read and
// written at the edges only: speaker.type, problems, log lines.
//
// The registry is config's, not a package of its own, because an entry's
// validation is config's parser at work (each problem placed at its YAML
// node); what the entries declare in a vocabulary other packages read
// (speakers.Kind, speakers.Caps, speakers.Port) is package speakers', which
// policy and peerconfig import without importing config.
type SpeakerKind struct {
	// Kind is the entry's name, title and capabilities.
	speakers.Kind
	// Sections are the settings only this kind reads. With another kind,
	// each one that is set is a problem at its field.
	Sections []Section
	// PIDFileSetting is the setting that names the speaker's pid file: the
	// process finder's error names it when the process name is ambiguous.
	PIDFileSetting string
	// Port is the speaker's BGP port.
	Port uint16
	// check applies the defaults of the kind's sections to c and checks
	// them (c.Speaker.Type is the kind's).
	check func(p *parser, c *Config)
	// process is how a checked c finds the speaker's process (Setting
	// left to SpeakerProcess).
	process func(c *Config) Process
}

// Section is a setting of one kind of speaker, and whether a config sets it.
type Section struct {
	Field string
	set   func(c *Config) bool
}

// Opening is how aokeyd drives a kind of speaker.
type Opening int

const (
	// OpensSpeaker: a bgp.Speaker whose sockets aokeyd keys (the daemon's
	// rotation controller).
	OpensSpeaker Opening = iota
	// OpensExecutor: an executor that writes the speaker's configuration;
	// the speaker keys its own sockets.
	OpensExecutor
)

// Opens says how aokeyd drives k: by an executor exactly when the speaker
// keys its own sockets (Caps.KeysOwnSockets), one fact and not two.
func (k *SpeakerKind) Opens() Opening {
	if k.Caps.KeysOwnSockets {
		return OpensExecutor
	}
	return OpensSpeaker
}

// Process is how a speaker's process is found: by PIDFile when it is set
// (and, when that file does not exist, by Name unless Name is ""); else
// the process listening on UnixSocket when that is set; else the one
// process whose comm is Name. Setting is the configuration field that
// names the pid file, which an ambiguous Name's error names.
type Process struct {
	PIDFile, UnixSocket, Name string
	Setting                   string
}

// The registry's entries, and the registry. gobgpd is the default.
var (
	GoBGPKind = &SpeakerKind{
		Kind: speakers.Kind{Name: SpeakerGoBGP, Title: "gobgpd", Caps: speakers.Caps{
			VRFs: true, PrefixBindings: true, ExcludesTCPOptions: true, SetsMACLength: true,
			Replace: true, Adopt: true, Migrate: true,
			// gobgpd keys its neighbors by address alone: one neighbor per
			// address, whatever its VRF.
			SeparatesVRFs: false,
		}},
		Sections: []Section{
			{"gobgp", func(c *Config) bool { return c.GoBGP != (GoBGP{}) }},
			{"speaker.api", func(c *Config) bool { return c.Speaker.API != "" }},
		},
		PIDFileSetting: "gobgp.pid_file",
		Port:           speakers.Port,
		check:          (*parser).checkGoBGPSpeaker,
		process: func(c *Config) Process {
			return Process{PIDFile: c.GoBGP.PIDFile, Name: c.GoBGP.ProcessName} // one of them is set
		},
	}
	FRRKind = &SpeakerKind{
		Kind: speakers.Kind{Name: SpeakerFRR, Title: "FRR", Caps: speakers.Caps{
			// FRR keeps a neighbor per VRF (router bgp AS vrf NAME).
			VRFs: true, SeparatesVRFs: true, PrefixBindings: true, ExcludesTCPOptions: true, SetsMACLength: true,
			InterfaceNeighbours: true, Replace: true, Adopt: true, Migrate: true,
		}},
		Sections:       []Section{{"speaker.frr", func(c *Config) bool { return c.Speaker.FRR != nil }}},
		PIDFileSetting: "speaker.frr.pid_file",
		Port:           speakers.Port,
		check:          (*parser).checkFRRSpeaker,
		process:        frrProcess,
	}
	BirdKind = &SpeakerKind{
		// BIRD keys a `protocol bgp`, one neighbor, in the default VRF
		// here; its key syntax has no MAC length and no TCP-option
		// exclusion (bgp/bird.Check agrees: TestBirdCapsAgreeWithBird).
		Kind:           speakers.Kind{Name: SpeakerBird, Title: "BIRD", Caps: speakers.Caps{KeysOwnSockets: true}},
		Sections:       []Section{{"speaker.bird", func(c *Config) bool { return c.Speaker.Bird != nil }}},
		PIDFileSetting: "speaker.bird.pid_file",
		Port:           speakers.Port,
		check:          (*parser).checkBirdSpeaker,
		process: func(c *Config) Process {
			b := c.Speaker.Bird
			// Debian's unit writes no pid file, and a router with bird2
			// and bird3, or a BIRD in another namespace, has more than one
			// process named bird: the control socket's listener is BIRD.
			return Process{PIDFile: b.PIDFile, UnixSocket: b.ControlSocket, Name: b.ProcessName}
		},
	}
	// SpeakerKinds is the registry: one entry per kind of speaker, in the
	// order problems and the reference list them.
	SpeakerKinds = []*SpeakerKind{GoBGPKind, FRRKind, BirdKind}
	// defaultSpeakerKind is speaker.type's default.
	defaultSpeakerKind = GoBGPKind
)

// SpeakerKindNamed returns the entry whose Name is name.
func SpeakerKindNamed(name string) (*SpeakerKind, bool) {
	for _, k := range SpeakerKinds {
		if k.Name == name {
			return k, true
		}
	}
	return nil, false
}

// SpeakerKind is the configured speaker's entry: after Parse always one
// (a Config built by hand without a type is the default's); nil for a
// type the registry does not know.
func (c *Config) SpeakerKind() *SpeakerKind {
	if c.Speaker.Type == "" {
		return defaultSpeakerKind
	}
	k, _ := SpeakerKindNamed(c.Speaker.Type)
	return k
}

// SpeakerProcess is how the configured speaker's process is found.
func (c *Config) SpeakerProcess() Process {
	k := c.SpeakerKind()
	p := k.process(c)
	p.Setting = k.PIDFileSetting
	return p
}

// speakerKindList lists the kinds' names as a problem offers them: "a, b
// or c"; sep "|" gives the reference's "a | b | c".
func speakerKindList(sep string) string {
	names := make([]string, len(SpeakerKinds))
	for i, k := range SpeakerKinds {
		names[i] = k.Name
	}
	if sep != "" {
		return strings.Join(names, " "+sep+" ")
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// kinds are the registry's entries as package speakers describes them.
func kinds() []speakers.Kind {
	out := make([]speakers.Kind, len(SpeakerKinds))
	for i, k := range SpeakerKinds {
		out[i] = k.Kind
	}
	return out
}

// checkSpeaker checks speaker.type against the registry, refuses the
// sections of every other kind, and has the kind check its own.
func (p *parser) checkSpeaker(c *Config) {
	s := &c.Speaker
	if s.Type == "" {
		s.Type = defaultSpeakerKind.Name
	}
	k, ok := SpeakerKindNamed(s.Type)
	if !ok {
		p.at("speaker.type", keystore.ErrInvalid, "want %s", speakerKindList(""))
		return
	}
	for _, o := range SpeakerKinds {
		if o == k {
			continue
		}
		for _, sec := range o.Sections {
			if sec.set(c) {
				p.at(sec.Field, keystore.ErrInvalid, "set only with speaker.type %s (this config says %s)", o.Name, k.Name)
			}
		}
	}
	k.check(p, c)
}
