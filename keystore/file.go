package keystore

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// FileOptions configure a FileSource.
type FileOptions struct {
	// Path of the YAML key file.
	Path string
	// AllowGroupOtherAccess accepts a key file whose mode grants any access
	// to group or others. By default such a file is refused.
	AllowGroupOtherAccess bool
	// Logger receives reload messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// maxFileSize bounds the key file.
const maxFileSize = 4 << 20

// ErrInsecureFile is returned for a key file readable or writable by group
// or others.
var ErrInsecureFile = errors.New("the key file is readable or writable by group or others")

// ErrUnreadable: the key file cannot be opened or read.
var ErrUnreadable = errors.New("the key file cannot be read")

// ErrNotFound is returned by Revoke for an unknown chain or key.
var ErrNotFound = errors.New("not found")

// FileSource reads MKTs from a YAML key file (see docs/keys.md). It re-reads
// the file on every Read and parses it only when its content changed; a
// chain's Version increases only when its decoded content changes, so the
// Cache's polling amounts to reload-on-change.
type FileSource struct {
	opts FileOptions
	log  *slog.Logger

	mu       sync.Mutex
	lastHash [32]byte
	last     *Snapshot // owned; Read hands out clones
	digests  map[string][32]byte
	versions map[string]uint64
}

// NewFile returns a FileSource for o.Path. It does not read the file yet.
func NewFile(o FileOptions) (*FileSource, error) {
	if o.Path == "" {
		return nil, errors.New("keystore: file source: empty path")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FileSource{opts: o, log: log, digests: map[string][32]byte{}, versions: map[string]uint64{}}, nil
}

// Name implements Source.
func (f *FileSource) Name() string { return "file " + f.opts.Path }

// Read implements Source.
func (f *FileSource) Read(ctx context.Context) (*Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := f.readFile()
	if err != nil {
		return nil, err
	}
	defer clear(data)
	h := sha256.Sum256(data)

	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.opts.Now()
	if f.last != nil && h == f.lastHash {
		s := f.last.Clone()
		s.ReadAt = now
		return s, nil
	}
	s, err := DecodeFile(f.opts.Path, data)
	if err != nil {
		return nil, err
	}
	s.ReadAt = now
	for name, c := range s.Chains {
		d := chainDigest(c)
		if old, ok := f.digests[name]; !ok || old != d {
			f.versions[name]++
			f.digests[name] = d
		}
		c.Version = f.versions[name]
	}
	f.log.Info("key file parsed", "path", f.opts.Path, "chains", len(s.Chains), "rejected", len(s.Rejected()))
	f.last.Zero()
	f.last = s.Clone()
	f.lastHash = h
	return s, nil
}

func (f *FileSource) readFile() ([]byte, error) {
	at := Pos{File: f.opts.Path}
	fh, err := os.Open(f.opts.Path)
	if err != nil {
		return nil, &FieldError{Pos: at, Err: fmt.Errorf("%w: %w", ErrUnreadable, pathless(err))}
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, &FieldError{Pos: at, Err: fmt.Errorf("%w: %w", ErrUnreadable, pathless(err))}
	}
	if !st.Mode().IsRegular() {
		return nil, &FieldError{Pos: at, Err: fmt.Errorf("%w: not a regular file", ErrUnreadable)}
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 && !f.opts.AllowGroupOtherAccess {
		return nil, &FieldError{Pos: at, Err: fmt.Errorf("mode %04o: %w", perm, ErrInsecureFile),
			Hint: "chmod 600 " + f.opts.Path + ", or accept the mode explicitly"}
	}
	data, err := readAllWiping(fh, int(min(st.Size()+1, maxFileSize+1)), maxFileSize)
	if err != nil {
		clear(data)
		return nil, &FieldError{Pos: at, Err: fmt.Errorf("%w: %w", ErrUnreadable, pathless(err))}
	}
	if len(data) > maxFileSize {
		clear(data)
		return nil, &FieldError{Pos: at, Err: fmt.Errorf("%w: larger than %d bytes", ErrUnreadable, maxFileSize)}
	}
	return data, nil
}

// Close wipes the cached snapshot.
func (f *FileSource) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last.Zero()
	f.last = nil
	return nil
}

// chainDigest is a process-local digest of a chain's decoded content (secrets
// enter only through their keyed fingerprints).
func chainDigest(c *Chain) [32]byte {
	h := sha256.New()
	for _, m := range c.Keys {
		fp := m.Secret.Fingerprint()
		fmt.Fprintf(h, "%q|%d|%d|%s|%d|%v|%q|%t|%s|%s|%t|%x\n", m.Name, m.SendID, m.RecvID, m.Algorithm, m.MACLen,
			m.Peers, m.VRF, m.IncludeTCPOptions, m.SendLifetime, m.AcceptLifetime, m.Revoked, fp[:])
	}
	for _, e := range c.Rejected {
		fmt.Fprintf(h, "rejected %s\n", e)
	}
	if p := c.MD5; p != nil {
		fp := p.Secret.Fingerprint()
		fmt.Fprintf(h, "md5|%v|%q|%t|%x\n", p.Peers, p.VRF, p.Revoked, fp[:])
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

// DecodeFile decodes and validates a YAML key file. path only names the
// source in errors. The result has Version 0 on every chain (FileSource
// numbers them). A syntax or structure error fails the whole file; a bad
// MKT only lands in its chain's Rejected list.
//
// The secrets' text is read from data itself, which the caller wipes:
// the YAML decoder sees it masked (see secretText), unless the file writes
// a secret in a way the masking does not recognise for certain.
func DecodeFile(path string, data []byte) (*Snapshot, error) { return decodeFile(path, data, true) }

// decodeFile is DecodeFile; without mask, the secrets' text goes through
// the YAML decoder (as it does when the masking does not recognise it).
func decodeFile(path string, data []byte, mask bool) (*Snapshot, error) {
	at := func(n *yaml.Node, field string, err error) error {
		return &FieldError{Pos: NodePos(n, path, ""), Field: field, Err: err}
	}
	v, doc, err := parseKeyFile(path, data, mask)
	if err != nil {
		return nil, err
	}
	top := v.(*object)
	if err := checkFields(top, topFields); err != nil {
		return nil, &FieldError{Pos: placeOf(err, Pos{File: path, Line: top.line}), Err: err}
	}
	cv, ok := top.get("chains")
	if !ok {
		return nil, at(doc, "chains", ErrMissingField)
	}
	chainsNode := FindNode(doc, "chains")
	chains, ok := cv.(*object)
	if !ok {
		return nil, at(chainsNode, "chains", refuse("want a mapping of chain name to chain"))
	}
	if len(chains.keys) == 0 {
		return nil, at(chainsNode, "chains", ErrNoChains)
	}
	s := &Snapshot{Source: "file " + path, Chains: map[string]*Chain{}}
	for _, name := range chains.keys {
		kn, vn := childPair(chainsNode, name)
		pl := &filePlacer{file: path, chainName: name, nameNode: kn, chainNode: vn}
		c, err := decodeChain(name, chains.vals[name], pl, func(key string, line int) string {
			return fmt.Sprintf("file:%s:%d", path, line)
		})
		if err != nil {
			s.Zero()
			return nil, err
		}
		s.Chains[name] = c
	}
	checkDuplicateIDs(s)
	return s, nil
}

// parseKeyFile parses a key file into the generic value tree, the
// secrets' text masked when it can, and returns with it the document's
// node tree for the problems' positions (of the masked text: the same).
func parseKeyFile(path string, data []byte, mask bool) (any, *yaml.Node, error) {
	if mask {
		if spans := yamlSpans(data); len(spans) > 0 {
			work := masked(data, spans)
			defer clear(work)
			conv := &yamlConv{file: path, budget: 1 << 15, input: data, secrets: spans, used: map[nodePos]bool{}}
			// A file that does not parse masked is parsed as it is, for
			// its own error: masking may have changed what is wrong.
			if v, doc, err := conv.parse(work); err == nil && !conv.mismatch && len(conv.used) == len(spans) {
				return v, doc, nil // the masked file has the same structure
			}
		}
	}
	return (&yamlConv{file: path, budget: 1 << 15}).parse(data)
}

// parse decodes one YAML document and converts it.
func (c *yamlConv) parse(text []byte) (any, *yaml.Node, error) {
	fail := func(line, col int, field string, err error) error {
		return &FieldError{Pos: Pos{File: c.file, Line: line, Column: col}, Field: field, Err: err}
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, fail(0, 0, "", fmt.Errorf("empty key file: %w", ErrNoChains))
		}
		return nil, nil, YAMLErrors(c.file, err, YAMLSchema{HideValues: true})
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, nil, fail(extra.Line, 0, "", fmt.Errorf("%w: more than one YAML document", ErrSyntax))
	}
	v, err := c.value(&doc, "")
	if err != nil {
		return nil, nil, fail(c.errLine, c.errCol, c.errField, err)
	}
	if _, ok := v.(*object); !ok {
		return nil, nil, fail(doc.Line, doc.Column, "", refuse("want a mapping with a chains field"))
	}
	return v, &doc, nil
}

// yamlConv converts a yaml.v3 node tree into the generic value tree.
type yamlConv struct {
	file     string
	budget   int // nodes left to visit (bounds alias expansion)
	errLine  int
	errCol   int
	errField string
	// With secrets, the tree is of a masked copy of input: the value of a
	// secret field found at one of the positions is the input's text
	// there (a secretText). used records the positions found so;
	// mismatch, that a masked position held something else.
	input    []byte
	secrets  map[nodePos]span
	used     map[nodePos]bool
	mismatch bool
}

// secretAt returns the input's text of the value vn of the field k, if k
// is a secret field and vn one of the masked spans.
func (c *yamlConv) secretAt(k, vn *yaml.Node) (secretText, bool) {
	if c.secrets == nil || !isSecretField(k.Value) || vn.Kind != yaml.ScalarNode {
		return nil, false
	}
	pos := nodePos{vn.Line, vn.Column}
	sp, ok := c.secrets[pos]
	if !ok {
		return nil, false
	}
	if vn.ShortTag() != "!!str" || !isMask(vn.Value, sp.n) {
		c.mismatch = true
		return nil, false
	}
	c.used[pos] = true
	return secretText(c.input[sp.off : sp.off+sp.n]), true
}

// fail records where conversion failed and returns a syntax error; msg
// is a string literal, never the input's text.
func (c *yamlConv) fail(n *yaml.Node, msg string) error {
	c.errLine, c.errCol = n.Line, n.Column
	return fmt.Errorf("%w: %s", ErrSyntax, msg)
}

// value converts n. path is n's YAML path, for a problem's field: the
// schema's field names, item numbers and chain names; any other mapping
// key is not shown (it may be a secret on the wrong line).
func (c *yamlConv) value(n *yaml.Node, path string) (any, error) {
	c.budget--
	if c.budget < 0 {
		return nil, c.fail(n, "document too large or too many aliases")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, c.fail(n, "empty document")
		}
		return c.value(n.Content[0], path)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, c.fail(n, "unresolved alias")
		}
		return c.value(n.Alias, path)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, e := range n.Content {
			v, err := c.value(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		o := &object{vals: map[string]any{}, lines: map[string]int{}, cols: map[string]int{}, line: n.Line}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, vn := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return nil, c.fail(k, "mapping keys must be plain scalars")
			}
			if _, dup := o.vals[k.Value]; dup {
				// The name is shown only when it is the schema's: any
				// other key may be a secret's text.
				c.errLine, c.errCol, c.errField = k.Line, k.Column, join(path, schemaField(k.Value))
				return nil, fmt.Errorf("%w: a mapping key is defined twice (its name is shown only when it is a field's)", ErrDuplicate)
			}
			var v any
			if st, ok := c.secretAt(k, vn); ok {
				c.budget--
				v = st
			} else {
				var err error
				if v, err = c.value(vn, join(path, shownKey(path, k.Value))); err != nil {
					return nil, err
				}
			}
			o.keys = append(o.keys, k.Value)
			o.vals[k.Value] = v
			o.lines[k.Value] = k.Line
			o.cols[k.Value] = k.Column
		}
		return o, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!timestamp", "!!binary":
			return n.Value, nil
		case "!!int", "!!float":
			return number(n.Value), nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, c.fail(n, "bad boolean")
			}
			return b, nil
		case "!!null":
			return nil, nil
		}
		return nil, c.fail(n, "unsupported YAML tag (only plain scalars, lists and mappings)")
	}
	return nil, c.fail(n, "unsupported YAML node")
}

// Revoke implements Source: it sets `revoked: true` on the key in the file
// (keeping the rest of the file, comments included as far as yaml.v3 can)
// and replaces the file atomically with the same mode.
func (f *FileSource) Revoke(ctx context.Context, chain, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := f.readFile()
	if err != nil {
		return err
	}
	defer clear(data)
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return YAMLErrors(f.opts.Path, err, YAMLSchema{HideValues: true})
	}
	kn := findKeyNode(&doc, chain, key)
	if kn == nil {
		return fmt.Errorf("file %s: chain %q key %q: %w", f.opts.Path, chain, key, ErrNotFound)
	}
	setMapBool(kn, "revoked", true)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("file %s: encode: %w", f.opts.Path, err)
	}
	_ = enc.Close()
	defer clear(buf.Bytes())
	return writeFileAtomic(f.opts.Path, buf.Bytes())
}

func mapGet(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func findKeyNode(doc *yaml.Node, chain, key string) *yaml.Node {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil
	}
	keys := mapGet(mapGet(mapGet(doc.Content[0], "chains"), chain), "keys")
	if keys == nil || keys.Kind != yaml.SequenceNode {
		return nil
	}
	for _, k := range keys.Content {
		if n := mapGet(k, "name"); n != nil && n.Value == key {
			return k
		}
	}
	return nil
}

func setMapBool(n *yaml.Node, key string, v bool) {
	val := "false"
	if v {
		val = "true"
	}
	if old := mapGet(n, key); old != nil {
		*old = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: val, LineComment: old.LineComment}
		return
	}
	n.Content = append(n.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: val})
}

// writeFileAtomic replaces path with data, keeping its mode.
func writeFileAtomic(path string, data []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("file %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("file %s: %w", path, err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return fmt.Errorf("file %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("file %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("file %s: %w", path, err)
	}
	return nil
}

//go:embed default-keys.yaml
var defaultKeyFile []byte

// DefaultKeyFile returns (a copy of) the embedded demo key file, for a first
// run. Its keys are public: demo only, never for production.
func DefaultKeyFile() []byte { return bytes.Clone(defaultKeyFile) }

// WriteDefaultKeyFile creates path with the embedded demo key file and mode
// 0600. It fails if path exists.
func WriteDefaultKeyFile(path string) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("file %s: %w", path, err)
	}
	if _, err := fh.Write(defaultKeyFile); err != nil {
		fh.Close()
		return fmt.Errorf("file %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("file %s: %w", path, err)
	}
	return nil
}
