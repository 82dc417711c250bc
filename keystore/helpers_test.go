package keystore

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

// suiteLog collects every log line and error text the tests produce; TestMain
// fails the run if any test secret shows up in it.
var suiteLog = &testkit.SyncBuffer{}

const secretsFile = "testdata/test-secrets.txt"

func TestMain(m *testing.M) {
	code := m.Run()
	secrets, err := readSecretLines()
	if err != nil {
		fmt.Fprintln(os.Stderr, "test secrets:", err)
		os.Exit(1)
	}
	out := suiteLog.String()
	for _, s := range secrets {
		if strings.Contains(out, s) {
			fmt.Fprintf(os.Stderr, "FAIL: a test secret (line %d of %s) appears in the suite's logs or errors\n", indexOf(secrets, s)+1, secretsFile)
			code = 1
		}
	}
	os.Exit(code)
}

func indexOf(xs []string, x string) int {
	for i, s := range xs {
		if s == x {
			return i
		}
	}
	return -1
}

func readSecretLines() ([]string, error) {
	f, err := os.Open(secretsFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// testSecrets are the raw test secrets (lines starting "aokeyd-test-").
type testSecrets []string

func loadSecrets(t testing.TB) testSecrets {
	t.Helper()
	lines, err := readSecretLines()
	if err != nil {
		t.Fatal(err)
	}
	var raw testSecrets
	for _, l := range lines {
		if strings.HasPrefix(l, "aokeyd-test-") {
			raw = append(raw, l)
		}
	}
	if len(raw) < 6 {
		t.Fatalf("%s: want at least 6 raw test secrets, have %d", secretsFile, len(raw))
	}
	return raw
}

func b64(s string) string  { return base64.StdEncoding.EncodeToString([]byte(s)) }
func hexs(s string) string { return hex.EncodeToString([]byte(s)) }

// logger returns a logger that writes to the test's output and the suite
// collector.
func logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), suiteLog), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// noSecret records text in the suite collector and fails t if it contains a
// test secret in any encoding.
func noSecret(t testing.TB, text string) {
	t.Helper()
	fmt.Fprintln(suiteLog, text)
	lines, err := readSecretLines()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range lines {
		if strings.Contains(text, s) {
			t.Errorf("text contains test secret line %d of %s", i+1, secretsFile)
		}
	}
}

// kj is a key document for tests (JSON and YAML share field names).
type kj map[string]any

func key(name string, send, recv int, secret string) kj {
	return kj{"name": name, "send_id": send, "recv_id": recv, "algorithm": "hmac(sha256)", "secret_b64": b64(secret)}
}

func (k kj) with(kv ...any) kj {
	n := kj{}
	for a, b := range k {
		n[a] = b
	}
	for i := 0; i+1 < len(kv); i += 2 {
		f := kv[i].(string)
		if kv[i+1] == nil {
			delete(n, f)
		} else {
			n[f] = kv[i+1]
		}
	}
	return n
}

func chainJSON(t testing.TB, peers []string, keys ...kj) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"peers": peers, "keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSecretsFileLists(t *testing.T) {
	lines, err := readSecretLines()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range loadSecrets(t) {
		if len(s) < 12 {
			t.Errorf("test secret line %d is shorter than 12 characters", indexOf(lines, s)+1)
		}
		for _, enc := range []string{b64(s), hexs(s)} {
			if indexOf(lines, enc) < 0 {
				t.Errorf("%s lacks an encoding of test secret line %d", secretsFile, indexOf(lines, s)+1)
			}
		}
	}
	// The demo file's secrets are listed too.
	s, err := DecodeFile("default", DefaultKeyFile())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Zero()
	for _, c := range s.Chains {
		for _, k := range c.Keys {
			if indexOf(lines, base64.StdEncoding.EncodeToString(k.Secret.Bytes())) < 0 ||
				indexOf(lines, hex.EncodeToString(k.Secret.Bytes())) < 0 {
				t.Errorf("%s lacks demo key %s", secretsFile, k.Name)
			}
		}
	}
}

func decodeJSONMap(b []byte) (map[string]any, error) {
	var m map[string]any
	err := json.Unmarshal(b, &m)
	return m, err
}

// TestSuiteLogCollects guards the TestMain secret check against being
// vacuous: test loggers and noSecret must feed the collector.
func TestSuiteLogCollects(t *testing.T) {
	before := len(suiteLog.String())
	logger(t).Info("collector check")
	noSecret(t, "collector check 2")
	if len(suiteLog.String()) <= before {
		t.Fatal("suite log collector received nothing")
	}
}

// relField is fe's field path without the chain's and the key's part
// (chains.core.keys[0].send_id and keys[0].send_id are send_id): the field
// as the harness names it.
func relField(fe *FieldError) string {
	f := strings.TrimPrefix(fe.Field, "chains.core")
	f = strings.TrimPrefix(f, ".")
	f = keyPathRE.ReplaceAllString(f, "")
	return strings.TrimPrefix(f, ".")
}

var keyPathRE = regexp.MustCompile(`^keys\[[0-9]+\]`)

// placeKind is where fe is: "file" (the harness's key file, at a line),
// "vault" (the harness's Vault chain) or "".
func placeKind(fe *FieldError) string {
	switch {
	case fe.File == pastePath && fe.Line > 0:
		return "file"
	case fe.File == pasteVault && fe.Line == 0:
		return "vault"
	}
	return ""
}
