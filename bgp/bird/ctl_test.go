package bird

import (
	"bufio"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestCtl: what Birdc returns for a reply on BIRD's control socket is what
// birdc prints for it (client/client.c, server_got_reply).
func TestCtl(t *testing.T) {
	for _, tc := range []struct {
		name, reply, want string
		err               bool
	}{
		{name: "configure", reply: "0002-Reading configuration from /x/bird.conf\n0003 Reconfigured\n",
			want: "Reading configuration from /x/bird.conf\nReconfigured\n"},
		{name: "protocols", reply: "2002-Name       Proto      Table      State  Since         Info\n" +
			"1002-peer_a     BGP        ---        up     06:10:01.123  Established   \n" +
			"1006-  BGP state:          Established\n" +
			"       Neighbor address: 10.255.16.1\n" +
			"0000 \n",
			want: "Name       Proto      Table      State  Since         Info\n" +
				"peer_a     BGP        ---        up     06:10:01.123  Established   \n" +
				"  BGP state:          Established\n" +
				"      Neighbor address: 10.255.16.1\n"},
		{name: "error", reply: "8003 No protocols match\n", want: "No protocols match\n"},
		{name: "async and garbage", reply: "+hello\nxx\n0000 \n", want: ">>> hello\n??? <xx>\n"},
		{name: "closed before the end", reply: "1002-peer_a\n", want: "peer_a\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "bird.ctl")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			got := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					got <- err.Error()
					return
				}
				defer c.Close()
				_, _ = c.Write([]byte("0001 BIRD 2.17 ready.\n"))
				cmd, _ := bufio.NewReader(c).ReadString('\n')
				got <- cmd
				_, _ = c.Write([]byte(tc.reply))
			}()
			out, err := Command(sock, "show protocols all peer_a")
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			want := "BIRD 2.17 ready.\n" + tc.want
			if out != want && !tc.err {
				t.Fatalf("output\n%q\nwant\n%q", out, want)
			}
			if cmd := <-got; cmd != "show protocols all peer_a\n" {
				t.Fatalf("command %q", cmd)
			}
			if tc.err && !strings.Contains(err.Error(), "show protocols all peer_a") {
				t.Fatalf("error %v does not name the command", err)
			}
		})
	}
}
