package metrics

import "testing"

func BenchmarkAgeFormat(b *testing.B) {
	vals := make([]float64, 4096)
	for i := range vals {
		vals[i] = float64(i%30) + float64(i)*0.000123457
	}
	buf := make([]byte, 0, 1<<16)
	b.Run("appendFloat", func(b *testing.B) {
		for b.Loop() {
			buf = buf[:0]
			for _, v := range vals {
				buf = appendFloat(buf, v)
			}
		}
	})
	b.Run("appendAge", func(b *testing.B) {
		for b.Loop() {
			buf = buf[:0]
			for _, v := range vals {
				buf = appendAge(buf, v)
			}
		}
	})
}
