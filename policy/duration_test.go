package policy

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"0", 0, false},
		{"90s", 90 * time.Second, false},
		{"24h", 24 * time.Hour, false},
		{"30d", 30 * Day, false},
		{"2w", 14 * Day, false},
		{"1d12h", 36 * time.Hour, false},
		{"1h30m", 90 * time.Minute, false},
		{"1.5h", 90 * time.Minute, false},
		{"250ms", 250 * time.Millisecond, false},
		{"1w2d3h4m5s", Week + 2*Day + 3*time.Hour + 4*time.Minute + 5*time.Second, false},
		{"", 0, true},
		{"30", 0, true},
		{"-5m", 0, true},
		{"1.5d", 0, true},
		{"3x", 0, true},
		{"d", 0, true},
		{"1y", 0, true},
		{"99999999999d", 0, true},
		{"106751d106751d", 0, true},
		{" 5m", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseDuration(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestFormatDurationRoundTrip(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{30 * Day, "30d"},
		{36 * time.Hour, "1d12h"},
		{90 * time.Minute, "1h30m"},
		{Day + 1500*time.Millisecond, "1d1.5s"},
		{5 * time.Minute, "5m"},
	}
	for _, tt := range tests {
		got := FormatDuration(tt.d)
		if got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
		back, err := ParseDuration(got)
		if err != nil || back != tt.d {
			t.Errorf("ParseDuration(FormatDuration(%v)) = %v, %v", tt.d, back, err)
		}
	}
}

func TestParseTime(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"2026-11-01T00:00:00Z", t0, false},
		{"2026-11-01T01:00:00+01:00", t0, false},
		{"2026-11-01", t0, false},
		{"2026-11-01T00:00:00.5Z", t0.Add(500 * time.Millisecond), false},
		{"2026-11-01 00:00", time.Time{}, true},
		{"yesterday", time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in)
		if (err != nil) != tt.wantErr {
			t.Fatalf("ParseTime(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
		}
		if !got.Equal(tt.want) {
			t.Errorf("ParseTime(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
