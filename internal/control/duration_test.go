package control

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Every duration aokeyd and aoctl write in JSON is a number of seconds;
// Go's duration text, as aokeyd wrote it before, still reads.
func TestDurationJSON(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		json string
	}{
		{0, `0`},
		{3 * time.Millisecond, `0.003`},
		{90 * time.Minute, `5400`},
		{365 * 24 * time.Hour, `31536000`},
		{1500 * time.Microsecond, `0.0015`},
	} {
		b, err := json.Marshal(Duration(tc.d))
		if err != nil || string(b) != tc.json {
			t.Errorf("Marshal(%s) = %s, %v; want %s", tc.d, b, err, tc.json)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || time.Duration(back) != tc.d {
			t.Errorf("Unmarshal(%s) = %s, %v; want %s", b, time.Duration(back), err, tc.d)
		}
	}
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{`"1h2m3s"`, time.Hour + 2*time.Minute + 3*time.Second, true}, // an older aokeyd's answer
		{`"3ms"`, 3 * time.Millisecond, true},
		{`12.5`, 12500 * time.Millisecond, true},
		{`-1`, -time.Second, true},
		{`"soon"`, 0, false},
		{`true`, 0, false},
		{`1e300`, 0, false},
	} {
		var d Duration
		err := json.Unmarshal([]byte(tc.in), &d)
		if (err == nil) != tc.ok || tc.ok && time.Duration(d) != tc.want {
			t.Errorf("Unmarshal(%s) = %s, %v; want %s (ok %v)", tc.in, time.Duration(d), err, tc.want, tc.ok)
		}
	}
}

// The reports' durations are numbers: uptime, key source age, a revoke's
// and a replace's elapsed time, a plan's horizon, a migration's bound.
func TestReportDurationsAreSeconds(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"uptime", PeerStatus{Uptime: Duration(90 * time.Second)}, `"uptime":90,`},
		{"age", KeySourceStatus{Age: Duration(time.Minute)}, `"age":60,`},
		{"revoke", RevokeResult{Elapsed: Duration(3 * time.Millisecond)}, `"elapsed":0.003`},
		{"replace", ReplaceResult{Elapsed: Duration(2 * time.Second)}, `"elapsed":2`},
		{"plan horizon", PlanReport{Horizon: Duration(365 * 24 * time.Hour)}, `"horizon":31536000`},
		{"migrate bound", MigrateRequest{Bound: Duration(5 * time.Minute)}, `"bound":300`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %s does not hold %s", tc.name, b, tc.want)
		}
	}
}
