package keystore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/internal/kvv2"
)

// VaultAuth selects how the Vault source authenticates.
type VaultAuth struct {
	// Method is "token" (the default) or "approle".
	Method string
	// Token is an explicit token. With neither Token nor TokenFile the
	// client's VAULT_TOKEN is used.
	Token string
	// TokenFile is a token sink written by Vault Agent; it is re-read when
	// it changes and after a 403.
	TokenFile string
	// RoleIDFile and SecretIDFile hold the AppRole credentials.
	RoleIDFile   string
	SecretIDFile string
	// AppRoleMount is the AppRole auth mount path; "" means "approle".
	AppRoleMount string
	// Increment is the TTL asked for at each renewal; 0 leaves it to Vault.
	Increment time.Duration
}

// Vault defaults: where the chains are, and the AppRole auth mount.
const (
	DefaultVaultMount   = "secret"
	DefaultVaultPrefix  = "aokeyd"
	DefaultAppRoleMount = "approle"
)

// VaultOptions configure a VaultSource.
type VaultOptions struct {
	// Config is the client configuration. nil means api.DefaultConfig(),
	// which reads VAULT_ADDR, VAULT_CACERT, VAULT_CAPATH, VAULT_CLIENT_CERT,
	// VAULT_CLIENT_KEY, VAULT_TLS_SERVER_NAME, VAULT_SKIP_VERIFY,
	// VAULT_CLIENT_TIMEOUT and VAULT_MAX_RETRIES.
	Config *api.Config
	// Mount is the KV v2 mount; "" means "secret".
	Mount string
	// Prefix is the path under the mount; chains live at
	// <Prefix>/chains/<chain>. "" means "aokeyd".
	Prefix string
	// Namespace is the Vault Enterprise namespace; "" keeps VAULT_NAMESPACE.
	Namespace string
	Auth      VaultAuth
	// Logger receives auth and renewal messages; nil discards them.
	Logger *slog.Logger
	// Now and After are the clock; nil means the time package.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// RetryInterval is how long Run waits after a failed login or before
	// re-checking a token that cannot be renewed; 0 means 30s.
	RetryInterval time.Duration
}

// VaultSource reads MKT chains from a Vault KV v2 mount (layout in
// docs/keys.md): one secret per chain at <mount>/data/<prefix>/chains/<chain>
// whose data is the chain document. It reads a chain's data only when the
// chain's metadata current_version changed since the last read.
type VaultSource struct {
	opts   VaultOptions
	client *api.Client
	log    *slog.Logger

	mu         sync.Mutex
	authed     bool
	tokenStamp fileStamp
	loginAuth  *api.SecretAuth // from the last AppRole login
	cache      map[string]*Chain
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// NewVault builds the client. It does not contact Vault.
func NewVault(o VaultOptions) (*VaultSource, error) {
	if o.Mount == "" {
		o.Mount = DefaultVaultMount
	}
	if o.Prefix == "" {
		o.Prefix = DefaultVaultPrefix
	}
	o.Mount = strings.Trim(o.Mount, "/")
	o.Prefix = strings.Trim(o.Prefix, "/")
	if o.Auth.Method == "" {
		o.Auth.Method = "token"
	}
	if o.Auth.AppRoleMount == "" {
		o.Auth.AppRoleMount = DefaultAppRoleMount
	}
	switch o.Auth.Method {
	case "token":
	case "approle":
		if o.Auth.RoleIDFile == "" || o.Auth.SecretIDFile == "" {
			return nil, errors.New("keystore: vault: approle needs role_id and secret_id files")
		}
	default:
		return nil, errors.New("keystore: vault: auth method: want token or approle")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = 30 * time.Second
	}
	cfg := o.Config
	if cfg == nil {
		cfg = api.DefaultConfig()
		if cfg.Error != nil {
			return nil, fmt.Errorf("keystore: vault: config from environment: %w", cfg.Error)
		}
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("keystore: vault: %w", err)
	}
	if o.Namespace != "" {
		c.SetNamespace(o.Namespace)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Auth.Method == "token" && o.Auth.Token != "" {
		c.SetToken(o.Auth.Token)
	}
	return &VaultSource{opts: o, client: c, log: log, cache: map[string]*Chain{}}, nil
}

// Client returns the underlying Vault client.
func (v *VaultSource) Client() *api.Client { return v.client }

// Name implements Source.
func (v *VaultSource) Name() string {
	return fmt.Sprintf("vault %s %s/%s", v.client.Address(), v.opts.Mount, v.opts.Prefix)
}

func (v *VaultSource) chainPath(chain string) string { return v.opts.Prefix + "/chains/" + chain }

func (v *VaultSource) where(chain string) string {
	return "vault:" + v.opts.Mount + "/" + v.chainPath(chain)
}

// ensureAuth makes sure the client holds a usable token. Caller holds v.mu.
func (v *VaultSource) ensureAuth(ctx context.Context) error {
	a := v.opts.Auth
	switch {
	case a.Method == "approle":
		if v.authed {
			return nil
		}
		return v.appRoleLogin(ctx)
	case a.TokenFile != "":
		st, err := os.Stat(a.TokenFile)
		if err != nil {
			return fmt.Errorf("vault: token file (auth.token_file): %w", pathless(err))
		}
		stamp := fileStamp{st.ModTime(), st.Size()}
		if v.authed && stamp == v.tokenStamp {
			return nil
		}
		b, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return fmt.Errorf("vault: token file (auth.token_file): %w", pathless(err))
		}
		tok := strings.TrimSpace(string(b))
		clear(b)
		if tok == "" {
			return errors.New("vault: the token file (auth.token_file) is empty")
		}
		v.client.SetToken(tok)
		v.tokenStamp, v.authed = stamp, true
		v.log.Info("vault token read from file", "path", a.TokenFile)
		return nil
	default:
		if v.client.Token() == "" {
			return errors.New("vault: no token (set VAULT_TOKEN, a token file or AppRole)")
		}
		v.authed = true
		return nil
	}
}

// pathless is err without the path of an *fs.PathError: the paths of
// credential files come from aokeyd's config, whose values are never
// shown (a token pasted where its file's path goes).
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

func readCredFile(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("vault: approle %s file: %w", what, pathless(err))
	}
	s := strings.TrimSpace(string(b))
	clear(b)
	if s == "" {
		return "", fmt.Errorf("vault: approle %s file is empty", what)
	}
	return s, nil
}

func (v *VaultSource) appRoleLogin(ctx context.Context) error {
	a := v.opts.Auth
	roleID, err := readCredFile(a.RoleIDFile, "role_id")
	if err != nil {
		return err
	}
	secretID, err := readCredFile(a.SecretIDFile, "secret_id")
	if err != nil {
		return err
	}
	v.client.ClearToken()
	s, err := v.client.Logical().WriteWithContext(ctx, "auth/"+a.AppRoleMount+"/login",
		map[string]any{"role_id": roleID, "secret_id": secretID})
	if err != nil {
		return fmt.Errorf("vault: approle login: %w", err)
	}
	if s == nil || s.Auth == nil || s.Auth.ClientToken == "" {
		return errors.New("vault: approle login: no token in the response")
	}
	v.client.SetToken(s.Auth.ClientToken)
	v.loginAuth = s.Auth
	v.authed = true
	v.log.Info("vault approle login", "ttl", time.Duration(s.Auth.LeaseDuration)*time.Second, "renewable", s.Auth.Renewable)
	return nil
}

// invalidate forces the next ensureAuth to log in again (or re-read the
// token file). Caller holds v.mu.
func (v *VaultSource) invalidate() {
	v.authed = false
	v.tokenStamp = fileStamp{}
}

func (v *VaultSource) canRelogin() bool {
	return v.opts.Auth.Method == "approle" || v.opts.Auth.TokenFile != ""
}

// IsPermissionDenied reports whether err is Vault's 403.
func IsPermissionDenied(err error) bool {
	var re *api.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusForbidden
}

// withRelogin runs f, and once more after a fresh login if Vault answered
// 403 and the auth method can obtain a new token. Caller holds v.mu.
func (v *VaultSource) withRelogin(ctx context.Context, f func() error) error {
	if err := v.ensureAuth(ctx); err != nil {
		return err
	}
	err := f()
	if err == nil || !IsPermissionDenied(err) || !v.canRelogin() {
		return err
	}
	v.log.Warn("vault answered 403; logging in again")
	v.invalidate()
	if err := v.ensureAuth(ctx); err != nil {
		return err
	}
	return f()
}

// Read implements Source. Any error (unreachable, sealed, 403, timeout, a
// chain that cannot be decoded) fails the whole read, so that the caller
// keeps its last good snapshot.
func (v *VaultSource) Read(ctx context.Context) (*Snapshot, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var s *Snapshot
	err := v.withRelogin(ctx, func() error {
		var err error
		s, err = v.read(ctx)
		return err
	})
	if err != nil {
		// A sealed Vault, or one that gave no answer, is said as the
		// fleet store says it: the Vault and the fix, one line.
		return nil, kvv2.Unavailable("read", v.opts.Mount+"/"+v.opts.Prefix+"/chains", v.client.Address(), err)
	}
	return s, nil
}

func (v *VaultSource) listChains(ctx context.Context) ([]string, error) {
	p := v.opts.Mount + "/metadata/" + v.opts.Prefix + "/chains"
	sec, err := v.client.Logical().ListWithContext(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("vault: list %s: %w", p, err)
	}
	if sec == nil || sec.Data == nil {
		return nil, &FieldError{Pos: Pos{File: "vault:" + p}, Err: ErrNoChains}
	}
	raw, _ := sec.Data["keys"].([]any)
	var names []string
	for _, k := range raw {
		if s, ok := k.(string); ok && !strings.HasSuffix(s, "/") {
			names = append(names, s)
		}
	}
	if len(names) == 0 {
		return nil, &FieldError{Pos: Pos{File: "vault:" + p}, Err: ErrNoChains}
	}
	return names, nil
}

func (v *VaultSource) read(ctx context.Context) (*Snapshot, error) {
	names, err := v.listChains(ctx)
	if err != nil {
		return nil, err
	}
	kv := v.client.KVv2(v.opts.Mount)
	s := &Snapshot{Source: v.Name(), ReadAt: v.opts.Now(), Chains: map[string]*Chain{}}
	fresh := map[string]*Chain{}
	fail := func(err error) (*Snapshot, error) {
		s.Zero()
		for n, c := range fresh {
			if v.cache[n] != c {
				c.Zero()
			}
		}
		return nil, err
	}
	for _, name := range names {
		md, err := kv.GetMetadata(ctx, v.chainPath(name))
		if err != nil {
			return fail(fmt.Errorf("vault: metadata %s/%s: %w", v.opts.Mount, v.chainPath(name), err))
		}
		ver := md.CurrentVersion
		if err := v.currentGone(name, md); err != nil {
			// Also when the version is cached: an operator who deletes
			// or destroys it means it, and the status must say so.
			return fail(err)
		}
		if c, ok := v.cache[name]; ok && c.Version == uint64(ver) {
			fresh[name] = c
			s.Chains[name] = c.Clone()
			continue
		}
		c, err := v.readChain(ctx, name, ver)
		if err != nil {
			return fail(err)
		}
		fresh[name] = c
		s.Chains[name] = c.Clone()
	}
	for n, c := range v.cache {
		if fresh[n] != c {
			c.Zero()
		}
	}
	v.cache = fresh
	checkDuplicateIDs(s)
	return s, nil
}

// currentGone is a kvv2.GoneError when the chain's current version was
// deleted (vault kv delete) or destroyed (vault kv destroy).
func (v *VaultSource) currentGone(name string, md *api.KVMetadata) error {
	return kvv2.CurrentGone(v.where(name), md, v.opts.Now())
}

// readRaw GETs a path and returns the body, which the caller clears.
func (v *VaultSource) readRaw(ctx context.Context, path string, q map[string][]string) ([]byte, error) {
	if t := v.client.ClientTimeout(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	resp, err := v.client.Logical().ReadRawWithDataWithContext(ctx, path, q)
	if resp != nil {
		defer resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	body, err := readAllWiping(resp.Body, int(min(resp.ContentLength+1, maxFileSize+1)), maxFileSize)
	if err == nil && len(body) > maxFileSize {
		err = fmt.Errorf("response larger than %d bytes", maxFileSize)
	}
	if err != nil {
		clear(body)
		return nil, err
	}
	return body, nil
}

func (v *VaultSource) readChain(ctx context.Context, name string, ver int) (*Chain, error) {
	p := v.opts.Mount + "/data/" + v.chainPath(name)
	body, err := v.readRaw(ctx, p, map[string][]string{"version": {fmt.Sprint(ver)}})
	defer clear(body)
	if err != nil {
		return nil, fmt.Errorf("vault: read %s version %d: %w", p, ver, err)
	}
	c, err := DecodeVaultResponse(v.where(name), name, body)
	if err != nil {
		return nil, err
	}
	if c.Version != uint64(ver) {
		c.Zero()
		return nil, fmt.Errorf("%s: asked for version %d, got %d", v.where(name), ver, c.Version)
	}
	return c, nil
}

// kvEnvelope is the part of a KV v2 read response aokeyd uses.
type kvEnvelope struct {
	Data *struct {
		Data     json.RawMessage `json:"data"`
		Metadata struct {
			Version      uint64 `json:"version"`
			DeletionTime string `json:"deletion_time"`
			Destroyed    bool   `json:"destroyed"`
		} `json:"metadata"`
	} `json:"data"`
}

// DecodeVaultResponse decodes the body of a KV v2 read of one chain
// (GET /v1/<mount>/data/<prefix>/chains/<chain>) and validates the chain.
// where names the path in errors. Chain.Version is the KV version.
func DecodeVaultResponse(where, chain string, body []byte) (*Chain, error) {
	var env kvEnvelope
	err := json.Unmarshal(body, &env)
	if env.Data != nil {
		defer clear(env.Data.Data) // json.RawMessage is a copy of the chain document
	}
	if err != nil {
		return nil, &FieldError{Pos: Pos{File: where}, Err: fmt.Errorf("response: %w: %s", ErrSyntax, jsonErr(err))}
	}
	if env.Data == nil || len(env.Data.Data) == 0 || bytes.Equal(env.Data.Data, []byte("null")) {
		return nil, &FieldError{Pos: Pos{File: where}, Field: "data",
			Err: fmt.Errorf("%w: the response has none (version deleted or destroyed?)", ErrMissingField)}
	}
	ver := env.Data.Metadata.Version
	src := fmt.Sprintf("%s@v%d", where, ver)
	c, err := DecodeVaultChain(src, chain, env.Data.Data)
	if err != nil {
		return nil, err
	}
	c.Version = ver
	return c, nil
}

// DecodeVaultChain decodes and validates one chain document (the data of
// the chain's KV secret, see docs/keys.md). src names it in errors. The
// secrets' text is read from doc itself, which the caller wipes: the JSON
// decoder sees it masked (see secretText) when it is a plain string value
// of a key's secret field.
func DecodeVaultChain(src, chain string, doc []byte) (*Chain, error) {
	return decodeVaultChain(src, chain, doc, true)
}

// decodeVaultChain is DecodeVaultChain; without mask, the secrets' text
// goes through the JSON decoder.
func decodeVaultChain(src, chain string, doc []byte, mask bool) (*Chain, error) {
	v, err := parseChainJSON(doc, mask)
	if err != nil {
		return nil, &FieldError{Pos: Pos{File: src}, Chain: chain, Err: err}
	}
	return decodeChain(chain, v, vaultPlacer{where: src}, func(key string, _ int) string {
		return "vault:" + strings.TrimPrefix(src, "vault:") + "#" + key
	})
}

// parseChainJSON parses a chain document into the generic value tree, the
// secrets' text masked when it can.
func parseChainJSON(doc []byte, mask bool) (any, error) {
	if mask {
		if spans := jsonSpans(doc); len(spans) > 0 {
			work := masked(doc, spans)
			defer clear(work)
			// A document that does not parse masked is parsed as it is,
			// for its own error: masking may have changed what is wrong
			// (a control character in a secret's string).
			if v, err := parseJSON(work); err == nil && unmaskJSON(v, spans, doc) {
				return v, nil // the masked document has the same structure
			}
		}
	}
	return parseJSON(doc)
}

func parseJSON(doc []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrSyntax, jsonErr(err))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON document", ErrSyntax)
	}
	v, err := fromJSON(raw, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	return v, nil
}

// unmaskJSON puts the input's text of each masked secret (a secretText of
// doc) in its place in the tree of the masked document, and reports
// whether each span was found where jsonSpans placed it, masked.
func unmaskJSON(v any, spans map[jsonSlot]span, doc []byte) bool {
	top, _ := v.(*object)
	if top == nil {
		return false
	}
	keys, _ := top.vals["keys"].([]any)
	for slot, sp := range spans {
		var k *object
		switch {
		case slot.key == md5Slot:
			k, _ = top.vals["md5"].(*object)
		case slot.key < len(keys):
			k, _ = keys[slot.key].(*object)
		}
		if k == nil {
			return false
		}
		if s, ok := k.vals[slot.field].(string); !ok || !isMask(s, sp.n) {
			return false
		}
		k.vals[slot.field] = secretText(doc[sp.off : sp.off+sp.n])
	}
	return true
}

// jsonErr renders a JSON error without quoting input (a syntax error would
// otherwise show a character that may belong to a secret).
func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte offset %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("JSON type error at byte offset %d (field %s)", te.Offset, te.Field)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "truncated JSON"
	}
	return "invalid JSON"
}

func fromJSON(v any, depth int) (any, error) {
	if depth > 32 {
		return nil, errors.New("JSON nested too deeply")
	}
	switch x := v.(type) {
	case map[string]any:
		o := &object{vals: make(map[string]any, len(x)), lines: map[string]int{}}
		o.keys = sortedKeys(x)
		for _, k := range o.keys {
			c, err := fromJSON(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			o.vals[k] = c
		}
		return o, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := fromJSON(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case json.Number:
		return number(x), nil
	case string, bool, nil:
		return x, nil
	}
	return nil, fmt.Errorf("unsupported JSON value %T", v)
}
