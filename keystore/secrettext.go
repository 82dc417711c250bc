package keystore

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"io"
	"slices"
	"unicode/utf8"
)

// A secret's text (its base64 or hex) is kept out of the YAML and JSON
// decoders. Both make Go strings of every value, which cannot be wiped,
// and buffers of their own, which nobody wipes: each read of a key source
// would leave a few more copies of every secret in the heap until the
// memory is reused (10 base64 copies became 25 over 20 SIGHUPs). So the
// decoders parse a copy of the input in which the text of each secret field
// is masked ('x' for every character), and the secret field's value in the
// generic tree is a secretText: the bytes of the input itself, which the
// caller wipes. Only what the masking recognises for certain is masked, and
// only when the decoded tree has every masked span exactly where a secret
// field's value is, with the mask as its text; otherwise the input is
// decoded as it is, as before (a secret written in an unusual way is then
// copied as before, never misread).

// secretText is the text of a secret field's value: a slice of the
// decoder's input, never copied.
type secretText []byte

// maskByte replaces each byte of a masked secret's text.
const maskByte = 'x'

// span is a secret's text in the input: its offset and length.
type span struct{ off, n int }

// secretChar reports whether c may appear in a secret's text as the
// masking recognises it: the base64 alphabet, which includes hex and "0x".
func secretChar(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '='
}

func isSecretField(name string) bool { return name == "secret_b64" || name == "secret_hex" }

// masked returns a copy of data with the spans masked; the caller wipes it.
func masked[K comparable](data []byte, spans map[K]span) []byte {
	work := bytes.Clone(data)
	for _, sp := range spans {
		for i := sp.off; i < sp.off+sp.n; i++ {
			work[i] = maskByte
		}
	}
	return work
}

// isMask reports whether s is the mask of an n-byte secret text.
func isMask(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != maskByte {
			return false
		}
	}
	return true
}

// yamlSpans finds, in a YAML key file, the values of secret_b64 and
// secret_hex fields written on the key's line: `secret_b64: "..."`, with
// single quotes or none, in block or flow style, the key plain or quoted.
// It returns each value's text by the position yaml.v3 gives its node
// (line and column of the value's first character, quote included, both
// 1-based, the column in characters).
func yamlSpans(data []byte) map[nodePos]span {
	type found struct {
		at int
		sp span
	}
	var all []found
	for _, name := range [...]string{"secret_b64", "secret_hex"} {
		for from := 0; ; {
			i := bytes.Index(data[from:], []byte(name))
			if i < 0 {
				break
			}
			i += from
			from = i + len(name)
			if sp, at, ok := yamlSpanAt(data, i, len(name)); ok {
				all = append(all, found{at, sp})
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	// One pass over the text for the positions, in text order.
	slices.SortFunc(all, func(a, b found) int { return a.at - b.at })
	out := make(map[nodePos]span, len(all))
	line, start, pos := 1, 0, 0
	for _, f := range all {
		for ; pos < f.at; pos++ {
			if data[pos] == '\n' {
				line, start = line+1, pos+1
			}
		}
		out[nodePos{line, 1 + utf8.RuneCount(data[start:f.at])}] = f.sp
	}
	return out
}

// yamlSpanAt reads the value after the field name at data[i:i+n]; at is
// where its node starts.
func yamlSpanAt(data []byte, i, n int) (sp span, at int, ok bool) {
	ks, j := i, i+n
	var q byte
	if i > 0 && (data[i-1] == '"' || data[i-1] == '\'') {
		q, ks = data[i-1], i-1
		if j >= len(data) || data[j] != q {
			return span{}, 0, false
		}
		j++
	}
	if ks > 0 && bytes.IndexByte([]byte(" \t\n\r{,"), data[ks-1]) < 0 {
		return span{}, 0, false
	}
	j = skipBlanks(data, j)
	if j >= len(data) || data[j] != ':' {
		return span{}, 0, false
	}
	j++
	if q == 0 && (j >= len(data) || data[j] != ' ' && data[j] != '\t') {
		return span{}, 0, false // "secret_b64:x" is one plain scalar
	}
	at = skipBlanks(data, j)
	if at >= len(data) {
		return span{}, 0, false
	}
	if c := data[at]; c == '"' || c == '\'' {
		k := at + 1
		for k < len(data) && secretChar(data[k]) {
			k++
		}
		if k == at+1 || k >= len(data) || data[k] != c || c == '\'' && k+1 < len(data) && data[k+1] == '\'' {
			return span{}, 0, false
		}
		return span{at + 1, k - at - 1}, at, true
	}
	k := at
	for k < len(data) && secretChar(data[k]) {
		k++
	}
	if k == at || k < len(data) && bytes.IndexByte([]byte("\n\r \t,}]"), data[k]) < 0 || !plainString(data[at:k]) {
		return span{}, 0, false
	}
	return span{at, k - at}, at, true
}

func skipBlanks(data []byte, j int) int {
	for j < len(data) && (data[j] == ' ' || data[j] == '\t') {
		j++
	}
	return j
}

// plainString reports whether yaml.v3 reads the plain scalar b (made of
// secretChar bytes) as a string, as the mask is read: not as true, false
// or null, and not as a number. It errs towards "maybe not", which only
// leaves the value unmasked.
func plainString(b []byte) bool {
	switch string(b) {
	case "true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL":
		return false
	}
	r := b
	if r[0] == '+' {
		r = r[1:]
	}
	if len(r) == 0 || r[0] < '0' || r[0] > '9' {
		return b[0] != '+'
	}
	if len(r) > 1 && r[0] == '0' && bytes.IndexByte([]byte("xXoObB"), r[1]) >= 0 {
		return false
	}
	// A number is digits, with an exponent of digits after e or E, +
	// allowed.
	d := 0
	for d < len(r) && '0' <= r[d] && r[d] <= '9' {
		d++
	}
	if d == len(r) {
		return false
	}
	if r[d] != 'e' && r[d] != 'E' {
		return true
	}
	e := d + 1
	if e < len(r) && r[e] == '+' {
		e++
	}
	if e == len(r) {
		return true
	}
	for ; e < len(r); e++ {
		if r[e] < '0' || r[e] > '9' {
			return true
		}
	}
	return false
}

// jsonSpans finds, in a Vault chain document (JSON), the string values
// of secret_b64 and secret_hex in the objects of the top-level "keys"
// array, by the key's index and field, and in the top-level "md5" object. A value with an escape is left
// out: its text is not the secret's text; so is one with a byte outside
// the secret's alphabet (see jsonPlainText).
func jsonSpans(doc []byte) map[jsonSlot]span {
	var out map[jsonSlot]span
	type frame struct {
		obj bool
		key string // the current key of an object (only names that matter)
		idx int    // the current item of an array
	}
	var stack []frame
	key := func(depth int) string {
		if depth < len(stack) && stack[depth].obj {
			return stack[depth].key
		}
		return ""
	}
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; c {
		case '{', '[':
			stack = append(stack, frame{obj: c == '{'})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].obj {
					stack[n-1].key = ""
				} else {
					stack[n-1].idx++
				}
			}
		case '"':
			end, escaped := jsonStringEnd(doc, i)
			if end < 0 {
				return nil // not JSON: the decoder says why
			}
			n := len(stack)
			j := end + 1
			for j < len(doc) && (doc[j] == ' ' || doc[j] == '\t' || doc[j] == '\n' || doc[j] == '\r') {
				j++
			}
			isKey := n > 0 && stack[n-1].obj && j < len(doc) && doc[j] == ':'
			switch {
			case isKey:
				switch string(doc[i+1 : end]) { // no copy: only constants are kept
				case "keys":
					stack[n-1].key = "keys"
				case "md5":
					stack[n-1].key = "md5"
				case "secret_b64":
					stack[n-1].key = "secret_b64"
				case "secret_hex":
					stack[n-1].key = "secret_hex"
				default:
					stack[n-1].key = "?"
				}
			case n == 3 && !escaped && key(0) == "keys" && !stack[1].obj && isSecretField(key(2)) && jsonPlainText(doc[i+1:end]):
				if out == nil {
					out = map[jsonSlot]span{}
				}
				out[jsonSlot{stack[1].idx, key(2)}] = span{i + 1, end - i - 1}
			case n == 2 && !escaped && key(0) == "md5" && isSecretField(key(1)) && jsonPlainText(doc[i+1:end]):
				if out == nil {
					out = map[jsonSlot]span{}
				}
				out[jsonSlot{md5Slot, key(1)}] = span{i + 1, end - i - 1}
			}
			i = end
		}
	}
	return out
}

// jsonPlainText reports whether masking text cannot change whether the
// document parses: every byte is one the masking recognises (a secret's
// alphabet, or a space, which decoding trims). A control character is
// invalid in a JSON string and 'x' is not, so a tab in a secret would make
// a document that is not JSON parse once masked.
func jsonPlainText(text []byte) bool {
	for _, c := range text {
		if !secretChar(c) && c != ' ' {
			return false
		}
	}
	return true
}

// nodePos is where yaml.v3 places a node: its line and column, 1-based,
// the column in characters.
type nodePos struct{ line, col int }

// jsonSlot is a secret field of the n-th key of a chain document.
type jsonSlot struct {
	key   int // md5Slot: the chain's md5 object
	field string
}

// md5Slot is the jsonSlot key of the chain's TCP-MD5 password.
const md5Slot = -1

// jsonStringEnd returns the index of the quote closing the JSON string
// that opens at doc[i], -1 if none, and whether it holds an escape.
func jsonStringEnd(doc []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j, escaped
		}
	}
	return -1, escaped
}

// heapBytes copies s into a new buffer on the heap. A small buffer that
// does not escape would be put on the goroutine's stack, and a stack that
// grows is copied and the old one dropped unwiped: a copy nobody could
// wipe.
//
//go:noinline
func heapBytes(s string) []byte {
	b := make([]byte, len(s))
	copy(b, s)
	return b
}

// decodeSecretText decodes a secret's text (base64, or hex with an
// optional 0x) into a new buffer that the caller wipes. On error it
// returns nothing, having wiped what it decoded.
func decodeSecretText(text []byte, isHex bool) ([]byte, error) {
	text = bytes.TrimSpace(text)
	if isHex {
		if bytes.HasPrefix(text, []byte("0x")) || bytes.HasPrefix(text, []byte("0X")) {
			text = text[2:]
		}
		raw := make([]byte, hex.DecodedLen(len(text)))
		if _, err := hex.Decode(raw, text); err != nil {
			clear(raw)
			return nil, refuse("not hexadecimal")
		}
		return raw, nil
	}
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
	n, err := base64.StdEncoding.Decode(raw, text)
	if err != nil {
		clear(raw)
		return nil, refuse("not standard base64 (RFC 4648 section 4, with padding)")
	}
	clear(raw[n:])
	return raw[:n], nil
}

// readAllWiping reads r to its end, at most limit bytes (more is an
// error of the caller's: it gets limit+1 bytes), into one buffer, sized
// by hint when known. A buffer outgrown is wiped before it is dropped: the
// input is a key source's, secrets and all.
func readAllWiping(r io.Reader, hint, limit int) ([]byte, error) {
	buf := make([]byte, 0, min(max(hint, 512), limit+1))
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return buf, nil
			}
			next := make([]byte, len(buf), min(2*cap(buf), limit+1))
			copy(next, buf)
			clear(buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
