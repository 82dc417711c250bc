package birdnative

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/tcpao"
)

// FileName is the include file of neighbor addr in VRF vrf, inside the
// keys directory: what the neighbor's `protocol bgp` includes
// (`include "/etc/bird/aokeyd/192.0.2.2.conf";`).
func FileName(addr netip.Addr, vrf string) string {
	if vrf == "" {
		return addr.String() + ".conf"
	}
	return addr.String() + "%" + vrf + ".conf"
}

const fileHeader = "# Written by aokeyd (speaker type bird): this neighbor's TCP-AO keys. Do not edit.\n"

// disabledBody is a peer's file once its only keys were revoked.
const disabledBody = "# Every key of this neighbor was revoked: the protocol is disabled until a key comes.\ndisabled;\nauthentication none;\n"

// render is a peer's file: the header and BIRD's key block (disabled: the
// protocol off, no key). The caller clears the bytes.
func render(keys []bird.Key, disabled bool) []byte {
	if disabled {
		return []byte(fileHeader + disabledBody)
	}
	body := bird.RenderKeys(keys)
	out := make([]byte, 0, len(fileHeader)+len(body))
	out = append(append(out, fileHeader...), body...)
	clear(body)
	return out
}

// keyLines finds render's key lines in b, as the regular expression
// `key \{ send id (\d+); recv id (\d+); secret hex:([0-9a-f]+); algorithm
// ([a-z0-9 ]+);( preferred;)?( deprecated;)? \};` would (FindAllSubmatch:
// leftmost, not overlapping; each match its whole and its six groups, an
// absent flag nil), matched by hand: the expression was most of a
// 1,000-file read's CPU after the syscalls (FuzzKeyLinesAsRegexp holds
// the two to one answer).
func keyLines(b []byte) [][][]byte {
	var out [][][]byte
	for i := 0; i < len(b); {
		j := bytes.Index(b[i:], keyLinePrefix)
		if j < 0 {
			break
		}
		start := i + j
		if m, end, ok := keyLineAt(b, start); ok {
			out = append(out, m)
			i = end
		} else {
			i = start + 1
		}
	}
	return out
}

var keyLinePrefix = []byte("key { send id ")

// keyLineAt matches one key line at b[start:] (which begins with
// keyLinePrefix): its submatches and where it ends.
func keyLineAt(b []byte, start int) ([][]byte, int, bool) {
	p := start + len(keyLinePrefix)
	m := make([][]byte, 7)
	run := func(in func(byte) bool) []byte {
		q := p
		for q < len(b) && in(b[q]) {
			q++
		}
		if q == p {
			return nil
		}
		r := b[p:q:q]
		p = q
		return r
	}
	lit := func(s string) bool {
		if !bytes.HasPrefix(b[p:], []byte(s)) {
			return false
		}
		p += len(s)
		return true
	}
	digit := func(c byte) bool { return '0' <= c && c <= '9' }
	lowerHex := func(c byte) bool { return digit(c) || 'a' <= c && c <= 'f' }
	algChar := func(c byte) bool { return digit(c) || 'a' <= c && c <= 'z' || c == ' ' }
	if m[1] = run(digit); m[1] == nil || !lit("; recv id ") {
		return nil, 0, false
	}
	if m[2] = run(digit); m[2] == nil || !lit("; secret hex:") {
		return nil, 0, false
	}
	if m[3] = run(lowerHex); m[3] == nil || !lit("; algorithm ") {
		return nil, 0, false
	}
	if m[4] = run(algChar); m[4] == nil || !lit(";") {
		return nil, 0, false
	}
	if q := p; lit(" preferred;") {
		m[5] = b[q:p:p]
	}
	if q := p; lit(" deprecated;") {
		m[6] = b[q:p:p]
	}
	if !lit(" };") {
		return nil, 0, false
	}
	m[0] = b[start:p:p]
	return m, p, true
}

// parseFile reads back the keys of a file aokeyd wrote (render's form).
// The secrets are new Secrets the caller zeroes.
func parseFile(b []byte) ([]bird.Key, error) {
	var out []bird.Key
	for _, m := range keyLines(b) {
		send, err1 := strconv.ParseUint(string(m[1]), 10, 8)
		recv, err2 := strconv.ParseUint(string(m[2]), 10, 8)
		raw := make([]byte, hex.DecodedLen(len(m[3])))
		_, err3 := hex.Decode(raw, m[3])
		if err := errors.Join(err1, err2, err3); err != nil || len(raw) == 0 || len(raw) > tcpao.MaxKeyLen {
			clear(raw)
			return nil, fmt.Errorf("a key line is not aokeyd's form (send, recv or secret)")
		}
		alg, ok := algorithmOf(string(m[4]))
		if !ok {
			clear(raw)
			return nil, fmt.Errorf("key send id %d: unknown algorithm %q", send, m[4])
		}
		out = append(out, bird.Key{SendID: uint8(send), RecvID: uint8(recv), Algorithm: alg, Secret: tcpao.NewSecret(raw),
			Preferred: len(m[5]) > 0, Deprecated: len(m[6]) > 0})
		clear(raw)
	}
	return out, nil
}

func algorithmOf(s string) (tcpao.Algorithm, bool) {
	for _, a := range []tcpao.Algorithm{tcpao.HMACSHA1, tcpao.HMACSHA256, tcpao.CMACAES128} {
		if bird.Algorithm(a) == s {
			return a, true
		}
	}
	return "", false
}

// maxFileBytes caps a neighbor's include file: a key line is under 200
// bytes, so this is thousands of keys; a larger file is not aokeyd's.
const maxFileBytes = 1 << 20

// readFile is the file at path (nil: none yet), read as a regular file
// only (durable.Read): a symlink is not followed and a FIFO does not
// block the pass. One that is not a regular file, or too large, is an
// error, and the pass leaves it as it is: its content, never read, cannot
// be put back into the keys directory by a restore.
func readFile(path string) ([]byte, error) {
	b, _, err := readFileInfo(path)
	return b, err
}

// readFileInfo is readFile, with the information of the file it read
// (nil: no file).
func readFileInfo(path string) ([]byte, fs.FileInfo, error) {
	b, fi, err := durable.ReadInfo(path, maxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if errors.Is(err, durable.ErrNotRegular) || errors.Is(err, durable.ErrTooLarge) {
		return nil, nil, fmt.Errorf("%s is %w: it is left as it is, and this neighbor's keys are not changed until it is removed (aokeyd then writes it)", path, err)
	}
	return b, fi, err
}

// shareDir gives the keys directory, and the include files already in
// it, to group gid for reading (0750 and 0640), or takes them back to
// the owner alone (0700 and 0600) when gid is 0: a start after the group
// changed, or files written before it was set, are mended here, so BIRD
// can read every file it includes. Only regular files are touched; the
// directory was checked (durable.CheckDir) to be aokeyd's.
func shareDir(dir string, gid int) error {
	dirMode, fileMode := os.FileMode(0o700), os.FileMode(0o600)
	if gid > 0 {
		dirMode, fileMode = 0o750, 0o640
	}
	chown := func(p string) error {
		if gid <= 0 {
			return nil
		}
		return os.Lchown(p, -1, gid)
	}
	if err := chown(dir); err != nil {
		return err
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".conf") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := chown(p); err != nil {
			return err
		}
		if err := os.Chmod(p, fileMode); err != nil {
			return err
		}
	}
	return nil
}

// validateEach checks peers' files with BIRD's own parser before BIRD
// sees them: one `bird -p` on a configuration of one protocol per file,
// each including it. It returns one error per file (nil: taken); when the
// whole fails, each file is checked alone to name the one refused.
func validateEach(ctx context.Context, birdBin string, files [][]byte) []error {
	errs := make([]error, len(files))
	if len(files) == 0 {
		return errs
	}
	if err := parseCheck(ctx, birdBin, files); err == nil {
		return errs
	} else if len(files) == 1 {
		errs[0] = err
		return errs
	}
	for i, f := range files {
		errs[i] = parseCheck(ctx, birdBin, [][]byte{f})
	}
	return errs
}

func parseCheck(ctx context.Context, birdBin string, files [][]byte) error {
	dir, err := os.MkdirTemp("", "aokeyd-bird-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var conf strings.Builder
	conf.WriteString("router id 192.0.2.1;\n")
	for i, b := range files {
		keys := filepath.Join(dir, fmt.Sprintf("keys%d.conf", i))
		if err := os.WriteFile(keys, b, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(&conf, "protocol bgp aokeyd_check%d {\n\tlocal 192.0.2.1 as 64512;\n\tneighbor 192.0.2.%d as 64513;\n\tinclude %q;\n\tipv4 { import none; export none; };\n}\n", i, 2+i%250, keys)
	}
	main := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(main, []byte(conf.String()), 0o600); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, birdBin, "-p", "-c", main).CombinedOutput()
	if err != nil {
		// BIRD's message names a line of the file, never its secrets.
		msg := strings.TrimSpace(string(bytes.ReplaceAll(out, []byte(dir+"/"), nil)))
		return fmt.Errorf("bird -p refuses the key file: %s (%v)", msg, err)
	}
	return nil
}
