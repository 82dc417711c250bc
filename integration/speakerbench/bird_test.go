package speakerbench

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBirdConfig renders BIRD's configuration on the host: one protocol per
// peer from its own source address, armed: k2 preferred, k1 and k3 kept.
func TestBirdConfig(t *testing.T) {
	f := &bench{peers: []netip.Addr{fleetAddr(1), fleetAddr(300)}}
	r := &birdFleet{dir: t.TempDir(), f: f}
	if err := r.write(true); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(r.dir, "bird.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for _, want := range []string{
		"protocol bgp p1 {\n\tlocal 10.1.0.1 as 65002;",
		"protocol bgp p300 {\n\tlocal 10.1.1.44 as 65002;",
		"protocol bgp solo1 {\n\tlocal 10.2.0.1 as 65002;",
		"protocol bgp solo2 {\n\tlocal 10.2.0.2 as 65002;",
		"protocol bgp solo3 {\n\tlocal 10.2.0.3 as 65002;",
		"protocol bgp solo5 {\n\tlocal 10.2.0.5 as 65002;",
		"protocol bgp solo9 {\n\tlocal 10.2.0.9 as 65002;",
		"key { send id 101; recv id 1; secret hex:" + hexSecret(1) + "; algorithm hmac sha256; };",
		"key { send id 102; recv id 2; secret hex:" + hexSecret(2) + "; algorithm hmac sha256; preferred; };",
		"key { send id 103; recv id 3; secret hex:" + hexSecret(3) + "; algorithm hmac sha256; };",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("bird.conf lacks %q:\n%s", want, conf)
		}
	}
	if n := strings.Count(conf, " preferred;"); n != 2+len(solos) {
		t.Errorf("%d preferred keys, want one per protocol (2 fleet peers and %d baseline peers)", n, len(solos))
	}
	if p := protoName(fleetAddr(300)); p != "p300" {
		t.Errorf("protoName(%s) = %s", fleetAddr(300), p)
	}
}
