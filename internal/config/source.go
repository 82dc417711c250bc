package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/user"
	"strconv"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/hashicorp/vault/api"
)

// SourceOptions are the runtime parts of a key source that the file does
// not hold.
type SourceOptions struct {
	// Logger receives the source's messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// KeySourceHandle is an opened key source. Close wipes its cached keys.
type KeySourceHandle interface {
	keystore.Source
	Close() error
}

// OpenKeySource builds the configured key source. It does not read it yet.
// For Vault, the caller also runs (*keystore.VaultSource).Run for token
// renewal when it keeps the source open.
func (c *Config) OpenKeySource(o SourceOptions) (KeySourceHandle, error) {
	ks := c.KeySource
	switch ks.Type {
	case SourceFile:
		src, err := keystore.NewFile(keystore.FileOptions{
			Path:                  ks.File.Path,
			AllowGroupOtherAccess: ks.File.AllowGroupReadable,
			Logger:                o.Logger,
			Now:                   o.Now,
		})
		if err != nil {
			return nil, fmt.Errorf("config: key_source.file: %w", err)
		}
		return src, nil
	case SourceVault:
		v := ks.Vault
		cfg := api.DefaultConfig()
		if cfg.Error != nil {
			return nil, fmt.Errorf("config: key_source.vault: %w", cfg.Error)
		}
		if v.Address != "" {
			cfg.Address = v.Address
		}
		if v.CACert != "" {
			if err := cfg.ConfigureTLS(&api.TLSConfig{CACert: v.CACert}); err != nil {
				return nil, fmt.Errorf("config: key_source.vault.ca_cert %s: %w", v.CACert, err)
			}
		}
		src, err := keystore.NewVault(keystore.VaultOptions{
			Config:    cfg,
			Mount:     v.Mount,
			Prefix:    v.Prefix,
			Namespace: v.Namespace,
			Auth: keystore.VaultAuth{
				Method:       v.Auth.Method,
				TokenFile:    v.Auth.TokenFile,
				RoleIDFile:   v.Auth.RoleIDFile,
				SecretIDFile: v.Auth.SecretIDFile,
				AppRoleMount: v.Auth.Mount,
			},
			Logger: o.Logger,
			Now:    o.Now,
		})
		if err != nil {
			return nil, fmt.Errorf("config: key_source.vault: %w", err)
		}
		return src, nil
	}
	return nil, c.problem("key_source.type", fmt.Errorf("%w: want %s or %s", keystore.ErrInvalid, SourceFile, SourceVault))
}

// problem is a problem with a field of the loaded config found after
// parsing, at the field's line and column.
func (c *Config) problem(field string, err error) *keystore.FieldError {
	file := c.File
	if file == "" {
		file = "config"
	}
	return &keystore.FieldError{Pos: keystore.NodePos(c.root, file, field), Field: field, Err: err}
}

// placed is err as problems: a decoder's problems as they are (they name
// their file), any other error as a problem of the config's field, which
// is what names the file or the service that failed.
func (c *Config) placed(field string, err error) []error {
	var fe *keystore.FieldError
	if errors.As(err, &fe) {
		return flatten(err)
	}
	return []error{c.problem(field, err)}
}

// LoadPolicy loads the configured policy file with the configured jitter
// seed.
func (c *Config) LoadPolicy() (*policy.Policy, error) {
	var opts []policy.Option
	if c.Policy.JitterSeed != "" {
		opts = append(opts, policy.WithJitterSeed([]byte(c.Policy.JitterSeed)))
	}
	return policy.Load(c.Policy.Path, opts...)
}

// ControlGroupID resolves control.group to a gid: a numeric gid as is, a
// name through the system's group database. ok is false when no group is
// configured. An error is a *keystore.FieldError naming the file and field.
func (c *Config) ControlGroupID() (gid int, ok bool, err error) {
	return c.lookupGroup("control.group", c.Control.Group)
}

// ControlAdminGroupID resolves control.admin_group; ok is false when it is
// unset.
func (c *Config) ControlAdminGroupID() (gid int, ok bool, err error) {
	return c.lookupGroup("control.admin_group", c.Control.AdminGroup)
}

func (c *Config) lookupGroup(field, name string) (gid int, ok bool, err error) {
	if name == "" {
		return 0, false, nil
	}
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		return n, true, nil
	}
	// The name is not shown: no value of the config is (a pasted
	// secret lands in any field).
	fail := func(why string) (int, bool, error) {
		return 0, false, c.problem(field, fmt.Errorf("%w: %s", keystore.ErrInvalid, why))
	}
	g, err := user.LookupGroup(name)
	var unknown user.UnknownGroupError
	switch {
	case errors.As(err, &unknown):
		return fail("no such group on this machine; name a group of /etc/group or a gid")
	case err != nil:
		return fail("the group database could not be read; name a gid")
	}
	n, err := strconv.Atoi(g.Gid)
	if err != nil {
		return fail("the group's gid is not a number; name a gid")
	}
	return n, true, nil
}

// ErrReadTimeout: a key source gave no answer within the time allowed
// (ReadKeySource's timeout).
var ErrReadTimeout = errors.New("timed out")

// ReadKeySource reads src, bounded by timeout when it is positive (a
// Vault that accepts and never answers, a file on a hung mount): past it
// the error wraps ErrReadTimeout and says how long was allowed. Any error
// names the source.
func ReadKeySource(ctx context.Context, src keystore.Source, timeout time.Duration) (*keystore.Snapshot, error) {
	rctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	snap, err := src.Read(rctx)
	if err != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("key source %s: %w: no answer within %s", src.Name(), ErrReadTimeout, timeout)
	}
	var fe *keystore.FieldError
	if err != nil && !errors.As(err, &fe) {
		return nil, fmt.Errorf("key source %s: %w", src.Name(), err)
	}
	return snap, err // a problem of the key source names its file
}
