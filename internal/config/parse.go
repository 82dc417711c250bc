package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"gopkg.in/yaml.v3"
)

// Parse parses and checks a config. file names the config in errors and
// anchors relative paths ("" leaves them as they are). On failure the error
// is a keystore.FieldErrors listing every problem found.
func Parse(file string, data []byte) (*Config, error) {
	p := &parser{file: file}
	if len(data) > MaxFileSize {
		p.add(0, "", fmt.Errorf("%w: file is larger than %d bytes", keystore.ErrSyntax, MaxFileSize))
		return nil, p.errs
	}
	c, ok := p.decode(data)
	if !ok {
		return nil, p.errs
	}
	c.File = file
	p.check(c)
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	c.resolve()
	return c, nil
}

type parser struct {
	file string
	root *yaml.Node
	errs keystore.FieldErrors
}

func (p *parser) add(line int, field string, err error) {
	p.errs = append(p.errs, &keystore.FieldError{Pos: keystore.Pos{File: p.name(), Line: line}, Field: field, Err: err})
}

// name is the config's name in problems: its file, or "config".
func (p *parser) name() string {
	if p.file == "" {
		return "config"
	}
	return p.file
}

// at records a problem at the YAML path field: the line and column of its
// value, or of the deepest mapping of the path that is there.
func (p *parser) at(field string, sentinel error, format string, args ...any) {
	p.errs = append(p.errs, &keystore.FieldError{Pos: keystore.NodePos(p.root, p.name(), field), Field: field,
		Err: fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))})
}

func (p *parser) decode(data []byte) (*Config, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	switch err := dec.Decode(&root); {
	case errors.Is(err, io.EOF):
		p.add(0, "", fmt.Errorf("%w: empty config", keystore.ErrSyntax))
		return nil, false
	case err != nil:
		p.yamlErr(err)
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			p.yamlErr(err)
		} else {
			p.add(extra.Line, "", fmt.Errorf("%w: more than one YAML document", keystore.ErrSyntax))
		}
		return nil, false
	}
	p.root = &root
	if p.otherFile() {
		return nil, false
	}
	var c Config
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&c); err != nil {
		p.yamlErr(err)
		return nil, false
	}
	c.root = p.root
	return &c, true
}

// typeNames renders the config's Go types in yaml.v3's messages by the
// names the operator writes.
var typeNames = strings.NewReplacer("config.Config", "config", "config.KeySource", "key_source",
	"config.FileSource", "key_source.file", "config.VaultAuth", "key_source.vault.auth",
	"config.Vault", "key_source.vault", "config.Policy", "policy", "config.GoBGP", "gobgp", "config.Speaker", "speaker", "config.FRR", "speaker.frr",
	"config.Control", "control", "config.Metrics", "metrics", "config.Log", "log", "config.Kernel", "kernel", "config.Fleet", "fleet")

// yamlErr records yaml.v3's messages ("line 3: field foo not found in type
// config.Log") as problems with lines, an unknown field that is a
// credential (a Vault token written in the config) with what to do.
func (p *parser) yamlErr(err error) {
	for _, fe := range keystore.YAMLErrors(p.name(), err, keystore.YAMLSchema{Types: typeNames, Target: Config{}, Root: p.root, HideValues: true}) {
		if errors.Is(fe, keystore.ErrUnknownField) {
			fe.Hint = credentialHint(fe.Field, keyAt(p.root, fe.Field, fe.Line, fe.Column))
		}
		p.errs = append(p.errs, fe)
	}
}

func (p *parser) check(c *Config) {
	p.checkSource(c)
	if c.Policy.Path == "" {
		p.at("policy.path", keystore.ErrMissingField, "the rotation policy file")
	}
	p.checkSpeaker(c)
	p.checkControl(&c.Control)
	if c.Metrics.Listen == "" {
		c.Metrics.Listen = DefaultMetricsListen
	}
	if c.Metrics.Listen != MetricsOff {
		if _, port, err := net.SplitHostPort(c.Metrics.Listen); err != nil || port == "" {
			p.at("metrics.listen", keystore.ErrInvalid, "not host:port (or %s); e.g. 127.0.0.1:9179", MetricsOff)
		}
	}
	if c.Kernel.KeepaliveProbe == flagOnBad {
		p.at("kernel.keepalive_probe", keystore.ErrInvalid, "want true or false (true, the default: a roll asks the peer for its next segment with a TCP keepalive probe)")
	}
	if c.Metrics.PerKey == flagBad {
		p.at("metrics.per_key", keystore.ErrInvalid, "want true or false (true: the per-key series too; false, the default: at most 8 series a peer)")
	}
	if c.Log.Format == "" {
		c.Log.Format = DefaultLogFormat
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		p.at("log.format", keystore.ErrInvalid, "want text or json")
	}
	if c.Log.Level == "" {
		c.Log.Level = DefaultLogLevel
	}
	if _, err := c.Log.SlogLevel(); err != nil {
		p.at("log.level", keystore.ErrInvalid, "want debug, info, warn or error")
	}
	p.checkFleet(c)
}

func (p *parser) checkSource(c *Config) {
	ks := &c.KeySource
	if ks.Refresh == 0 {
		ks.Refresh = Duration(DefaultRefresh)
	}
	if ks.StaleAfter == 0 {
		ks.StaleAfter = Duration(DefaultStaleAfter)
	}
	if ks.StaleAfter < ks.Refresh {
		p.at("key_source.stale_after", keystore.ErrInvalid, "%s is shorter than refresh %s", ks.StaleAfter, ks.Refresh)
	}
	switch ks.Type {
	case "":
		p.at("key_source.type", keystore.ErrMissingField, "want %s or %s", SourceFile, SourceVault)
	case SourceFile:
		if ks.Vault != nil {
			p.at("key_source.vault", keystore.ErrInvalid, "set only with type %s", SourceVault)
		}
		if ks.File == nil || ks.File.Path == "" {
			p.at("key_source.file.path", keystore.ErrMissingField, "the key file (type %s)", SourceFile)
		}
	case SourceVault:
		if ks.File != nil {
			p.at("key_source.file", keystore.ErrInvalid, "set only with type %s", SourceFile)
		}
		if ks.Vault == nil {
			ks.Vault = &Vault{}
		}
		p.checkVault(ks.Vault)
	default:
		p.at("key_source.type", keystore.ErrInvalid, "want %s or %s", SourceFile, SourceVault)
	}
}

func (p *parser) checkVault(v *Vault) {
	if v.Address != "" {
		u, err := url.Parse(v.Address)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.at("key_source.vault.address", keystore.ErrInvalid, "not an http(s) URL; want e.g. https://vault.example:8200 (a token goes in the file auth.token_file names)")
		}
	}
	a := &v.Auth
	if a.Method == "" {
		a.Method = AuthToken
	}
	switch a.Method {
	case AuthToken:
		if a.RoleIDFile != "" || a.SecretIDFile != "" {
			p.at("key_source.vault.auth", keystore.ErrInvalid, "role_id_file and secret_id_file need method %s", AuthAppRole)
		}
	case AuthAppRole:
		if a.RoleIDFile == "" {
			p.at("key_source.vault.auth.role_id_file", keystore.ErrMissingField, "method %s needs it", AuthAppRole)
		}
		if a.SecretIDFile == "" {
			p.at("key_source.vault.auth.secret_id_file", keystore.ErrMissingField, "method %s needs it", AuthAppRole)
		}
		if a.TokenFile != "" {
			p.at("key_source.vault.auth.token_file", keystore.ErrInvalid, "set only with method %s", AuthToken)
		}
	default:
		p.at("key_source.vault.auth.method", keystore.ErrInvalid, "want %s or %s", AuthToken, AuthAppRole)
	}
}

func (p *parser) checkGoBGP(g *GoBGP) {
	if g.Address == "" {
		g.Address = DefaultGoBGPAddress
	}
	if _, port, err := net.SplitHostPort(g.Address); err != nil || port == "" {
		p.at("gobgp.address", keystore.ErrInvalid, "not host:port; want e.g. %s", DefaultGoBGPAddress)
	}
	switch {
	case g.PIDFile != "" && g.ProcessName != "":
		p.at("gobgp.process_name", keystore.ErrInvalid, "set pid_file or process_name, not both")
	case g.PIDFile == "" && g.ProcessName == "":
		g.ProcessName = DefaultProcessName
	}
	if strings.ContainsRune(g.ProcessName, '/') {
		p.at("gobgp.process_name", keystore.ErrInvalid, "a process name (comm), not a path")
	}
}

func (p *parser) checkControl(c *Control) {
	if c.Socket == "" {
		c.Socket = DefaultControlSocket
	}
	if c.Mode == 0 {
		c.Mode = FileMode(DefaultControlMode)
	}
	if c.Mode&0o007 != 0 {
		p.at("control.mode", keystore.ErrInvalid, "%04o grants access to others (the socket is root's and its group's)", uint32(c.Mode))
	}
	if c.Mode&0o600 != 0o600 {
		p.at("control.mode", keystore.ErrInvalid, "%04o: the owner needs read and write", uint32(c.Mode))
	}
	if strings.ContainsAny(c.Group, " :\t") {
		p.at("control.group", keystore.ErrInvalid, "not a group name or gid")
	}
	if strings.ContainsAny(c.AdminGroup, " :\t") {
		p.at("control.admin_group", keystore.ErrInvalid, "not a group name or gid")
	}
	for _, d := range []struct {
		field string
		v     *Duration
		def   time.Duration
	}{
		{"control.read_timeout", &c.ReadTimeout, DefaultControlReadTimeout},
		{"control.idle_timeout", &c.IdleTimeout, DefaultControlIdleTimeout},
		{"control.write_timeout", &c.WriteTimeout, DefaultControlWriteTimeout},
	} {
		switch {
		case *d.v == 0:
			*d.v = Duration(d.def)
		case *d.v < Duration(time.Second):
			p.at(d.field, keystore.ErrInvalid, "%s is too short (at least 1s; default %s)", time.Duration(*d.v), Duration(d.def))
		}
	}
	for _, n := range []struct {
		field string
		v     *int
		def   int
	}{
		{"control.max_connections", &c.MaxConnections, DefaultControlMaxConns},
		{"control.admin_connections", &c.AdminConnections, DefaultControlAdminConns},
	} {
		switch {
		case *n.v == 0:
			*n.v = n.def
		case *n.v < 0 || *n.v > MaxControlMaxConns:
			p.at(n.field, keystore.ErrInvalid, "%d is out of range (1..%d; default %d)", *n.v, MaxControlMaxConns, n.def)
		}
	}
}

// SlogLevel is the configured level as a slog.Level.
func (l Log) SlogLevel() (slog.Level, error) {
	var lv slog.Level
	err := lv.UnmarshalText([]byte(l.Level))
	return lv, err
}

// resolve makes relative paths relative to the config file's directory.
func (c *Config) resolve() {
	if c.File == "" {
		return
	}
	dir := filepath.Dir(c.File)
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&c.Policy.Path)
	if f := c.KeySource.File; f != nil {
		abs(&f.Path)
	}
	if v := c.KeySource.Vault; v != nil {
		abs(&v.CACert)
		abs(&v.Auth.TokenFile)
		abs(&v.Auth.RoleIDFile)
		abs(&v.Auth.SecretIDFile)
	}
	abs(&c.GoBGP.PIDFile)
	if f := c.Speaker.FRR; f != nil {
		abs(&f.PIDFile)
		abs(&f.VtySocket)
	}
	abs(&c.Control.Socket)
}
