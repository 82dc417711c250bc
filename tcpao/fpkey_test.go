package tcpao_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// fpChild, when set, makes this test binary a child of TestSetFingerprintKey:
// a process that has computed no fingerprint yet.
const fpChild = "TCPAO_FPKEY_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(fpChild) != "" {
		key := bytes.Repeat([]byte{7}, tcpao.FingerprintKeyLen)
		if err := tcpao.SetFingerprintKey(key[:5]); err == nil {
			os.Stdout.WriteString("short key taken\n")
			os.Exit(1)
		}
		if err := tcpao.SetFingerprintKey(key); err != nil {
			os.Stdout.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		fp := tcpao.NewSecret([]byte("a key of sixteen")).Fingerprint()
		if err := tcpao.SetFingerprintKey(key); !errors.Is(err, tcpao.ErrFingerprintKeyInUse) {
			os.Stdout.WriteString("key changed after use\n")
			os.Exit(1)
		}
		os.Stdout.WriteString(hex.EncodeToString(fp[:]) + "\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSetFingerprintKey: two processes given the same fingerprint key
// fingerprint a secret alike (a record of installed keys survives a
// restart), this one, under its random key, differently; the key cannot be
// changed once a fingerprint was computed.
func TestSetFingerprintKey(t *testing.T) {
	run := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fpChild+"=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	a, b := run(), run()
	if a != b || len(a) != 32 {
		t.Fatalf("same key, two processes: fingerprints %q and %q", a, b)
	}
	here := tcpao.NewSecret([]byte("a key of sixteen")).Fingerprint()
	if hex.EncodeToString(here[:]) == a {
		t.Fatal("the random key fingerprints like the set one")
	}
	if err := tcpao.SetFingerprintKey(bytes.Repeat([]byte{7}, tcpao.FingerprintKeyLen)); !errors.Is(err, tcpao.ErrFingerprintKeyInUse) {
		t.Fatalf("SetFingerprintKey after use = %v", err)
	}
}
