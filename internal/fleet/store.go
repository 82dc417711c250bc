package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/internal/kvv2"
)

// Vault runs f with an authenticated client: keystore.VaultSource's
// WithClient in aokeyd (its token, renewed), Client in aoctl (the
// operator's own token). Declared here, where it is used.
type Vault interface {
	WithClient(ctx context.Context, f func(*api.Client) error) error
}

// Client is a Vault with a plain client: the operator's token from the
// environment (VAULT_ADDR, VAULT_TOKEN and friends).
type Client struct{ C *api.Client }

// WithClient implements Vault.
func (c Client) WithClient(_ context.Context, f func(*api.Client) error) error { return f(c.C) }

// ErrPath is wrapped by ParsePath's errors.
var ErrPath = errors.New("bad fleet vault path")

// ParsePath splits a fleet path ("secret/aokeyd/fleet": a KV v2 mount,
// then a prefix under it).
func ParsePath(s string) (mount, prefix string, err error) {
	s = strings.Trim(s, "/")
	mount, prefix, ok := strings.Cut(s, "/")
	if !ok || mount == "" || prefix == "" {
		return "", "", fmt.Errorf("%w: %q: want MOUNT/PREFIX, e.g. secret/aokeyd/fleet", ErrPath, s)
	}
	for _, seg := range strings.Split(prefix, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", "", fmt.Errorf("%w: %q: empty or relative path segment", ErrPath, s)
		}
	}
	return mount, prefix, nil
}

// ValidRouterID reports whether id can name a router's document: one path
// segment of letters, digits, '.', '-', '_' (at most 128).
func ValidRouterID(id string) bool {
	if id == "" || len(id) > 128 || id == "." || id == ".." {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_'
		if !ok {
			return false
		}
	}
	return true
}

// Store reads and writes the fleet documents under a KV v2 mount and
// prefix.
type Store struct {
	V      Vault
	Mount  string
	Prefix string
}

func (s Store) dataPath(rel string) string { return s.Mount + "/data/" + s.Prefix + "/" + rel }
func (s Store) metaPath(rel string) string { return s.Mount + "/metadata/" + s.Prefix + "/" + rel }

// Where names the fleet path in messages.
func (s Store) Where() string { return s.Mount + "/" + s.Prefix }

// call runs f with the store's client (s.V, which logs in first when it
// must). A Vault that is sealed or gives no answer, to f's request or to
// the login, fails it with a *kvv2.UnavailableError naming op and p: never an
// empty document or record.
func (s Store) call(ctx context.Context, op, p string, f func(*api.Client) error) error {
	var addr string
	err := s.V.WithClient(ctx, func(c *api.Client) error {
		addr = c.Address()
		return f(c)
	})
	return kvv2.Unavailable(op, p, addr, err)
}

func (s Store) put(ctx context.Context, rel string, v any, cas int) error {
	body := map[string]any{"data": v}
	if cas >= 0 {
		body["options"] = map[string]any{"cas": cas}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("fleet: encode %s: %w", rel, err)
	}
	p := s.dataPath(rel)
	return s.call(ctx, "write", p, func(c *api.Client) error {
		if _, err := c.Logical().WriteBytesWithContext(ctx, p, b); err != nil {
			return fmt.Errorf("vault: write %s: %w", p, err)
		}
		return nil
	})
}

// get reads the current version of rel into v. It reports the version, 0
// when there is none.
func (s Store) get(ctx context.Context, rel string, v any) (int, error) {
	p := s.dataPath(rel)
	var ver int
	err := s.call(ctx, "read", p, func(c *api.Client) error {
		sec, err := c.Logical().ReadWithContext(ctx, p)
		if err != nil {
			return fmt.Errorf("vault: read %s: %w", p, err)
		}
		if sec == nil || sec.Data == nil || sec.Data["data"] == nil {
			// No data but a version's metadata: that version, the
			// current one, was deleted or destroyed. Not an empty
			// document: its reader must not take it for one.
			if sec == nil {
				return nil
			}
			if md, ok := sec.Data["metadata"].(map[string]any); ok {
				return kvv2.GoneInRead(p, md)
			}
			return nil
		}
		if md, ok := sec.Data["metadata"].(map[string]any); ok {
			if n, ok := md["version"].(json.Number); ok {
				x, _ := n.Int64()
				ver = int(x)
			}
		}
		b, err := json.Marshal(sec.Data["data"])
		if err != nil {
			return fmt.Errorf("vault: read %s: %w", p, err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("%s: not a fleet document: %w", p, err)
		}
		return nil
	})
	return ver, err
}

// version is rel's current KV version, 0 when it does not exist.
func (s Store) version(ctx context.Context, rel string) (int, error) {
	p := s.metaPath(rel)
	var ver int
	err := s.call(ctx, "read metadata", p, func(c *api.Client) error {
		sec, err := c.Logical().ReadWithContext(ctx, p)
		if err != nil {
			return fmt.Errorf("vault: metadata %s: %w", p, err)
		}
		if sec == nil || sec.Data == nil {
			return nil
		}
		if n, ok := sec.Data["current_version"].(json.Number); ok {
			x, _ := n.Int64()
			ver = int(x)
		}
		return nil
	})
	return ver, err
}

// PutStatus publishes d as its router's document.
func (s Store) PutStatus(ctx context.Context, d Document) error {
	return s.put(ctx, "routers/"+d.RouterID, d, -1)
}

// Statuses reads every router's document. A document that cannot be read
// or decoded is left out and reported in errs; an empty fleet is no
// error.
func (s Store) Statuses(ctx context.Context) (docs []Document, errs []error, err error) {
	p := s.metaPath("routers")
	var ids []string
	err = s.call(ctx, "list", p, func(c *api.Client) error {
		sec, err := c.Logical().ListWithContext(ctx, p)
		if err != nil {
			return fmt.Errorf("vault: list %s: %w", p, err)
		}
		if sec == nil || sec.Data == nil {
			return nil
		}
		raw, _ := sec.Data["keys"].([]any)
		for _, k := range raw {
			if id, ok := k.(string); ok && !strings.HasSuffix(id, "/") {
				ids = append(ids, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(ids)
	// The documents are read readsAtOnce at a time: a fleet of dozens of
	// routers is read in a few round trips, not one per router.
	type read struct {
		d   Document
		ver int
		err error
	}
	reads := make([]read, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, readsAtOnce)
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			reads[i].ver, reads[i].err = s.get(ctx, "routers/"+id, &reads[i].d)
		}()
	}
	wg.Wait()
	for i, id := range ids {
		r := reads[i]
		var gone *kvv2.GoneError
		switch {
		case errors.As(r.err, &gone):
			// a router's document deleted: as if it were not there
		case r.err != nil:
			errs = append(errs, r.err)
		case r.ver == 0:
			// deleted meanwhile
		case r.d.RouterID != id:
			errs = append(errs, fmt.Errorf("%s: router_id %q does not match its path", s.dataPath("routers/"+id), r.d.RouterID))
		default:
			docs = append(docs, r.d)
		}
	}
	return docs, errs, nil
}

// readsAtOnce bounds the documents Statuses reads at once.
const readsAtOnce = 8

// Revocations reads the fleet's revocation record and its version (0: no
// record yet).
func (s Store) Revocations(ctx context.Context) (RevocationList, int, error) {
	var l RevocationList
	ver, err := s.get(ctx, "revocations", &l)
	return l, ver, err
}

// RevocationsVersion is the record's current version (0: none), one
// metadata read: the publisher reads the record only when it changed.
func (s Store) RevocationsVersion(ctx context.Context) (int, error) {
	return s.version(ctx, "revocations")
}

// ErrAlreadyRevoked is returned by AddRevocation when the record already
// holds the key; the existing entry is returned with it.
var ErrAlreadyRevoked = errors.New("already revoked in the fleet record")

// AddRevocation appends r to the record with check-and-set: when another
// writer got there first (Vault refuses the write and the record's version
// moved), it reads again and retries. It returns the record's new
// version.
func (s Store) AddRevocation(ctx context.Context, r Revocation) (Revocation, int, error) {
	var lastErr error
	for range 8 {
		l, ver, err := s.Revocations(ctx)
		if err != nil {
			return r, 0, err
		}
		for _, e := range l.Revocations {
			if e.Chain == r.Chain && e.Key == r.Key {
				return e, ver, ErrAlreadyRevoked
			}
		}
		l.Schema = Schema
		l.Revocations = append(l.Revocations, r)
		err = s.put(ctx, "revocations", l, ver)
		if err == nil {
			return r, ver + 1, nil
		}
		lastErr = err
		// A refused check-and-set is a 400 after which the version moved:
		// asked of Vault, not read from the error's text.
		var re *api.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest {
			return r, 0, err
		}
		now, verr := s.RevocationsVersion(ctx)
		if verr != nil || now == ver {
			return r, 0, err
		}
	}
	return r, 0, fmt.Errorf("fleet: revocation record kept changing under us: %w", lastErr)
}
