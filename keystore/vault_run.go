package keystore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/vault/api"
)

// Run keeps the Vault token alive until ctx ends: it logs in (AppRole) or
// looks the token up, renews it with the client's LifetimeWatcher, and logs
// in again (or re-reads the token file) when renewal fails or the token
// reaches its max TTL. Read works without Run (it logs in on demand and
// again after a 403); Run avoids the 403 in the first place.
func (v *VaultSource) Run(ctx context.Context) error {
	for {
		auth, err := v.currentAuth(ctx)
		if err != nil {
			v.log.Warn("vault auth failed; retrying", "err", err.Error(), "retry_in", v.opts.RetryInterval.String())
			if !v.sleep(ctx, v.opts.RetryInterval) {
				return ctx.Err()
			}
			continue
		}
		if !auth.Renewable || auth.LeaseDuration <= 0 {
			// Nothing to renew (root/periodic-less token, or Vault Agent
			// owns the token): look again later.
			if !v.sleep(ctx, v.opts.RetryInterval) {
				return ctx.Err()
			}
			continue
		}
		if err := v.watch(ctx, auth); err != nil {
			return err
		}
	}
}

func (v *VaultSource) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-v.opts.After(d):
		return true
	}
}

// currentAuth ensures a token and describes it for the LifetimeWatcher.
func (v *VaultSource) currentAuth(ctx context.Context) (*api.SecretAuth, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.ensureAuth(ctx); err != nil {
		return nil, err
	}
	if v.opts.Auth.Method == "approle" && v.loginAuth != nil && v.loginAuth.ClientToken == v.client.Token() {
		a := *v.loginAuth
		return &a, nil
	}
	sec, err := v.client.Auth().Token().LookupSelfWithContext(ctx)
	if err != nil {
		if IsPermissionDenied(err) {
			v.invalidate()
		}
		return nil, fmt.Errorf("vault: token lookup-self: %w", err)
	}
	ttl, err := sec.TokenTTL()
	if err != nil {
		return nil, fmt.Errorf("vault: token lookup-self: ttl: %w", err)
	}
	renewable, _ := sec.TokenIsRenewable()
	return &api.SecretAuth{ClientToken: v.client.Token(), Renewable: renewable, LeaseDuration: int(ttl / time.Second)}, nil
}

// watch renews auth until renewal stops, then invalidates the token so that
// the next round logs in again. It returns non-nil only when ctx ends.
func (v *VaultSource) watch(ctx context.Context, auth *api.SecretAuth) error {
	w, err := v.client.NewLifetimeWatcher(&api.LifetimeWatcherInput{
		Secret:        &api.Secret{Auth: auth},
		Increment:     int(v.opts.Auth.Increment / time.Second),
		RenewBehavior: api.RenewBehaviorErrorOnErrors,
	})
	if err != nil {
		return fmt.Errorf("vault: lifetime watcher: %w", err)
	}
	go w.Start()
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-w.DoneCh():
			if err != nil {
				v.log.Warn("vault token renewal failed; logging in again", "err", err.Error())
			} else {
				v.log.Info("vault token reached the end of its renewable life; logging in again")
			}
			v.mu.Lock()
			v.invalidate()
			v.mu.Unlock()
			return nil
		case r := <-w.RenewCh():
			if r != nil && r.Secret != nil && r.Secret.Auth != nil {
				v.log.Info("vault token renewed", "ttl", (time.Duration(r.Secret.Auth.LeaseDuration) * time.Second).String())
			}
		}
	}
}

// Revoke implements Source: it sets "revoked": true on the key in the
// chain's current KV version and writes it back as a new version with
// check-and-set, retrying when another writer got there first. Routers
// reading the same chain see the new version and remove the key.
func (v *VaultSource) Revoke(ctx context.Context, chain, key string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	var lastErr error
	for range 5 {
		err := v.withRelogin(ctx, func() error { return v.revokeOnce(ctx, chain, key) })
		if !isCASMismatch(err) {
			return err
		}
		lastErr = err
	}
	return lastErr
}

func isCASMismatch(err error) bool {
	var re *api.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest {
		return false
	}
	for _, e := range re.Errors {
		if strings.Contains(e, "check-and-set") {
			return true
		}
	}
	return false
}

func (v *VaultSource) revokeOnce(ctx context.Context, chain, key string) error {
	md, err := v.client.KVv2(v.opts.Mount).GetMetadata(ctx, v.chainPath(chain))
	if err != nil {
		if errors.Is(err, api.ErrSecretNotFound) {
			return fmt.Errorf("%s: chain %q: %w", v.where(chain), chain, ErrNotFound)
		}
		return fmt.Errorf("vault: metadata %s: %w", v.where(chain), err)
	}
	ver := md.CurrentVersion
	p := v.opts.Mount + "/data/" + v.chainPath(chain)
	body, err := v.readRaw(ctx, p, map[string][]string{"version": {fmt.Sprint(ver)}})
	defer clear(body)
	if err != nil {
		return fmt.Errorf("vault: read %s version %d: %w", p, ver, err)
	}
	var env kvEnvelope
	err = json.Unmarshal(body, &env)
	if env.Data != nil {
		defer clear(env.Data.Data)
	}
	if err != nil || env.Data == nil {
		return fmt.Errorf("%s: response: bad KV v2 envelope", v.where(chain))
	}
	dec := json.NewDecoder(bytes.NewReader(env.Data.Data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%s@v%d: chain %q: %s", v.where(chain), ver, chain, jsonErr(err))
	}
	keys, _ := doc["keys"].([]any)
	found := false
	for _, k := range keys {
		m, ok := k.(map[string]any)
		if !ok || m["name"] != key {
			continue
		}
		found = true
		if b, _ := m["revoked"].(bool); b {
			v.log.Info("vault key already revoked", "chain", chain, "key", key, "version", ver)
			return nil
		}
		m["revoked"] = true
	}
	if !found {
		return fmt.Errorf("%s@v%d: chain %q key %q: %w", v.where(chain), ver, chain, key, ErrNotFound)
	}
	payload, err := json.Marshal(map[string]any{"data": doc, "options": map[string]any{"cas": ver}})
	if err != nil {
		return fmt.Errorf("%s: encode: %w", v.where(chain), err)
	}
	defer clear(payload)
	if _, err := v.client.Logical().WriteBytesWithContext(ctx, p, payload); err != nil {
		return fmt.Errorf("vault: write %s (cas %d): %w", p, ver, err)
	}
	v.log.Warn("key revoked in vault", "chain", chain, "key", key, "previous_version", ver)
	return nil
}

// WriteChain validates a chain document (JSON, see docs/keys.md) and writes
// it as a new KV version. cas >= 0 is Vault's check-and-set (0: the chain
// must not exist yet); cas < 0 writes unconditionally. A document with any
// rejected key is refused. It returns the new version.
func (v *VaultSource) WriteChain(ctx context.Context, chain string, doc []byte, cas int) (int, error) {
	c, err := DecodeVaultChain(v.where(chain), chain, doc)
	if err != nil {
		return 0, err
	}
	c.Zero()
	if len(c.Rejected) > 0 {
		return 0, fmt.Errorf("refusing to write chain %q: %w", chain, errors.Join(c.Rejected...))
	}
	body := map[string]any{"data": json.RawMessage(doc)}
	if cas >= 0 {
		body["options"] = map[string]any{"cas": cas}
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return 0, fmt.Errorf("%s: encode: %w", v.where(chain), err)
	}
	defer clear(payload)
	p := v.opts.Mount + "/data/" + v.chainPath(chain)
	v.mu.Lock()
	defer v.mu.Unlock()
	var sec *api.Secret
	err = v.withRelogin(ctx, func() error {
		var err error
		sec, err = v.client.Logical().WriteBytesWithContext(ctx, p, payload)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("vault: write %s: %w", p, err)
	}
	if sec == nil || sec.Data == nil {
		return 0, fmt.Errorf("vault: write %s: no version in the response", p)
	}
	n, ok := sec.Data["version"].(json.Number)
	if !ok {
		return 0, fmt.Errorf("vault: write %s: no version in the response", p)
	}
	ver, err := n.Int64()
	if err != nil {
		return 0, fmt.Errorf("vault: write %s: version: %w", p, err)
	}
	return int(ver), nil
}

// Close wipes the cached chains.
func (v *VaultSource) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range v.cache {
		c.Zero()
	}
	v.cache = map[string]*Chain{}
	return nil
}

// WithClient runs f with the source's authenticated client, outside the
// source's lock: a slow request of f (the fleet status publisher's) never
// holds up a key read. After a 403 it logs in again (when the auth method
// can) and runs f once more. f must not keep the client.
func (v *VaultSource) WithClient(ctx context.Context, f func(*api.Client) error) error {
	v.mu.Lock()
	err := v.ensureAuth(ctx)
	v.mu.Unlock()
	if err != nil {
		return err
	}
	err = f(v.client)
	if err == nil || !IsPermissionDenied(err) || !v.canRelogin() {
		return err
	}
	v.mu.Lock()
	v.log.Warn("vault answered 403; logging in again")
	v.invalidate()
	err = v.ensureAuth(ctx)
	v.mu.Unlock()
	if err != nil {
		return err
	}
	return f(v.client)
}
