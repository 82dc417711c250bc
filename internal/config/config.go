package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"gopkg.in/yaml.v3"
)

// Defaults of the optional settings.
const (
	DefaultPath          = "/etc/aokeyd/aokeyd.yaml"
	DefaultControlSocket = control.DefaultSocket
	DefaultControlMode   = fs.FileMode(0o660)
	// Control socket limits: control's defaults, defined there.
	DefaultControlReadTimeout  = control.DefaultReadTimeout
	DefaultControlIdleTimeout  = control.DefaultIdleTimeout
	DefaultControlWriteTimeout = control.DefaultWriteTimeout
	DefaultControlMaxConns     = control.DefaultMaxConns
	DefaultControlAdminConns   = control.DefaultAdminConns
	MaxControlMaxConns         = 1024 // bounds max_connections and admin_connections
	DefaultMetricsListen       = "127.0.0.1:9179"
	DefaultGoBGPAddress        = "127.0.0.1:50051"
	DefaultProcessName         = "gobgpd"
	DefaultRefresh             = keystore.DefaultRefresh
	DefaultStaleAfter          = 10 * time.Minute
	DefaultResync              = 30 * time.Second // not a setting: the longest time between two full reconcile passes
	DefaultLogFormat           = "text"
	DefaultLogLevel            = "info"
	// MetricsOff as metrics.listen disables the metrics listener.
	MetricsOff = "off"
	// MaxFileSize bounds the size of a config file.
	MaxFileSize = 1 << 20
)

// Key source types.
const (
	SourceFile  = "file"
	SourceVault = "vault"
)

// Vault auth methods.
const (
	AuthToken   = "token"
	AuthAppRole = "approle"
)

// Config is a parsed, checked aokeyd configuration with defaults applied
// and relative paths resolved.
type Config struct {
	// File is the name the config was parsed under ("" for Default).
	File      string    `yaml:"-"`
	KeySource KeySource `yaml:"key_source"`
	Policy    Policy    `yaml:"policy"`
	Speaker   Speaker   `yaml:"speaker"`
	GoBGP     GoBGP     `yaml:"gobgp"`
	Control   Control   `yaml:"control"`
	Metrics   Metrics   `yaml:"metrics"`
	Log       Log       `yaml:"log"`
	Kernel    Kernel    `yaml:"kernel"`
	// Fleet, when set, publishes this router's status to Vault and applies
	// the fleet's revocations (package internal/fleet).
	Fleet *Fleet `yaml:"fleet"`
	// root is the file's node tree (nil for Default): the positions of
	// the problems found after parsing.
	root *yaml.Node
}

// Fleet is the router's place in the fleet view through Vault. It uses
// the key source's Vault (address, namespace, auth), so it needs
// key_source.type vault.
type Fleet struct {
	// VaultPath is the KV v2 mount and prefix, e.g. secret/aokeyd/fleet.
	VaultPath string `yaml:"vault_path"`
	// RouterID names this router's document (letters, digits, . - _).
	RouterID string `yaml:"router_id"`
	// Addresses are the router's own addresses, by which other routers
	// name it as their peer; the local addresses of its sessions are
	// added.
	Addresses []string `yaml:"addresses"`
}

// KeySource selects where MKTs come from.
type KeySource struct {
	Type string `yaml:"type"`
	// Refresh is the polling interval; StaleAfter the age of the last good
	// read after which status warns.
	Refresh    Duration    `yaml:"refresh"`
	StaleAfter Duration    `yaml:"stale_after"`
	File       *FileSource `yaml:"file"`
	Vault      *Vault      `yaml:"vault"`
}

// FileSource is a YAML key file.
type FileSource struct {
	Path               string `yaml:"path"`
	AllowGroupReadable bool   `yaml:"allow_group_readable"`
}

// Vault is a HashiCorp Vault KV v2 key source.
type Vault struct {
	Address   string    `yaml:"address"`
	Mount     string    `yaml:"mount"`
	Prefix    string    `yaml:"prefix"`
	Namespace string    `yaml:"namespace"`
	CACert    string    `yaml:"ca_cert"`
	Auth      VaultAuth `yaml:"auth"`
}

// VaultAuth is how aokeyd logs in to Vault. It names files only: no secret
// is ever written in the config.
type VaultAuth struct {
	Method       string `yaml:"method"`
	TokenFile    string `yaml:"token_file"`
	RoleIDFile   string `yaml:"role_id_file"`
	SecretIDFile string `yaml:"secret_id_file"`
	Mount        string `yaml:"mount"`
}

// Policy names the rotation policy file.
type Policy struct {
	Path       string `yaml:"path"`
	JitterSeed string `yaml:"jitter_seed"`
}

// GoBGP says how to reach gobgpd: its gRPC API, and how to find its process
// (exactly one of PIDFile and ProcessName is set after Parse).
type GoBGP struct {
	Address     string `yaml:"address"`
	PIDFile     string `yaml:"pid_file"`
	ProcessName string `yaml:"process_name"`
}

// Control is the control socket aoctl talks to.
type Control struct {
	Socket string `yaml:"socket"`
	// Group is the read group, a group name or numeric gid: its members
	// may read (status, plan). It is the socket file's group; "" allows
	// root (and the daemon's own uid) only, unless AdminGroup is set.
	Group string `yaml:"group"`
	// AdminGroup's members may also change state (rotate, revoke); "":
	// root and the daemon's own uid only. When Group is set, admins must
	// be members of Group too (the socket file's group); without Group
	// the socket file belongs to AdminGroup.
	AdminGroup string   `yaml:"admin_group"`
	Mode       FileMode `yaml:"mode"`
	// ReadTimeout bounds reading one request, IdleTimeout a connection
	// between requests, WriteTimeout handling and answering one request.
	ReadTimeout  Duration `yaml:"read_timeout"`
	IdleTimeout  Duration `yaml:"idle_timeout"`
	WriteTimeout Duration `yaml:"write_timeout"`
	// MaxConnections caps the connections served at once;
	// AdminConnections is how many more only admins may have, so that
	// other users' connections never keep an admin out.
	MaxConnections   int `yaml:"max_connections"`
	AdminConnections int `yaml:"admin_connections"`
}

// Metrics is the Prometheus listener.
type Metrics struct {
	Listen string `yaml:"listen"`
	// PerKey exports the per-key counters and the per-peer detail series
	// as well (metrics.Options.PerKey); off, a peer has at most 8 series.
	PerKey Flag `yaml:"per_key"`
}

// Flag is a setting written true or false. Any other value decodes (as
// flagBad) so that Parse names its field, its line and what to write:
// yaml.v3's own message for a bool names neither the field nor the fix.
type Flag uint8

const (
	flagFalse Flag = iota // the zero value: unset is false
	flagTrue
	flagBad
)

// On reports whether the flag is true.
func (f Flag) On() bool { return f == flagTrue }

// UnmarshalYAML implements yaml.Unmarshaler: true or false (as yaml.v3
// decodes a bool), anything else flagBad.
func (f *Flag) UnmarshalYAML(n *yaml.Node) error {
	var b bool
	switch {
	case n.Kind != yaml.ScalarNode || n.Decode(&b) != nil:
		*f = flagBad
	case b:
		*f = flagTrue
	default:
		*f = flagFalse
	}
	return nil
}

// Enabled reports whether the metrics listener is on.
func (m Metrics) Enabled() bool { return m.Listen != MetricsOff }

// Log configures the daemon's slog handler.
type Log struct {
	Format string `yaml:"format"`
	Level  string `yaml:"level"`
}

// Kernel holds kernel knobs.
type Kernel struct {
	RaiseOptmem bool `yaml:"raise_optmem"`
	ExpediteRCU bool `yaml:"expedite_rcu"`
	// KeepaliveProbe: a roll's waits for the peer's next segment ask the
	// kernel for one TCP keepalive probe (rotator/peerprobe.go); on unless
	// written false.
	KeepaliveProbe FlagOn `yaml:"keepalive_probe"`
}

// FlagOn is a setting written true or false whose unset value is true;
// any other value decodes as a bad one, which Parse names (as Flag).
type FlagOn uint8

const (
	flagOnUnset FlagOn = iota // the zero value: unset is true
	flagOnTrue
	flagOnFalse
	flagOnBad
)

// On reports whether the setting is true (or unset).
func (f FlagOn) On() bool { return f == flagOnUnset || f == flagOnTrue }

// UnmarshalYAML implements yaml.Unmarshaler: true or false, anything
// else flagOnBad.
func (f *FlagOn) UnmarshalYAML(n *yaml.Node) error {
	var g Flag
	if err := g.UnmarshalYAML(n); err != nil {
		return err
	}
	*f = map[Flag]FlagOn{flagFalse: flagOnFalse, flagTrue: flagOnTrue, flagBad: flagOnBad}[g]
	return nil
}

// Duration is a time.Duration written like the policy's durations ("30s",
// "10m", "1d").
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := policy.ParseDuration(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: not a duration (want e.g. 30s, 10m, 1d)", n.Line)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return policy.FormatDuration(time.Duration(d)), nil }

// String renders d like policy.FormatDuration.
func (d Duration) String() string { return policy.FormatDuration(time.Duration(d)) }

// FileMode is a permission mode written in octal ("0660").
type FileMode fs.FileMode

// UnmarshalYAML implements yaml.Unmarshaler.
func (m *FileMode) UnmarshalYAML(n *yaml.Node) error {
	v, err := strconv.ParseUint(strings.TrimPrefix(n.Value, "0o"), 8, 32)
	if err != nil || n.Kind != yaml.ScalarNode || v > 0o777 {
		return fmt.Errorf("line %d: not a mode (want octal, e.g. 0660)", n.Line)
	}
	*m = FileMode(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (m FileMode) MarshalYAML() (any, error) { return fmt.Sprintf("%04o", uint32(m)), nil }

// Load reads and parses the config file at path.
func Load(path string) (*Config, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

func readLimited(path string) ([]byte, error) {
	unreadable := func(err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", pe.Op, pe.Err) // the path is the problem's file
		}
		fe := &keystore.FieldError{Pos: keystore.Pos{File: path}, Err: fmt.Errorf("%w: %w", ErrUnreadable, err)}
		if errors.Is(err, fs.ErrNotExist) {
			fe.Hint = "name aokeyd's configuration file (the package installs " + DefaultPath + "; aokeyd init -dir DIR writes one)"
		}
		return fe
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, unreadable(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, unreadable(err)
	}
	return data, nil
}

// ErrUnreadable: the configuration file cannot be opened or read.
var ErrUnreadable = errors.New("the configuration cannot be read")
