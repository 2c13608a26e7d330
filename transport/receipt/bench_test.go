package receipt

import "testing"

// BenchmarkSign is what a settled spend pays for its receipt: the claims
// encoded and signed with the current key. Verification runs at the
// reader's side and is not on the spend's path.
func BenchmarkSign(b *testing.B) {
	kr := testKeyring(b)
	c := sampleClaims(0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kr.Sign(c); err != nil {
			b.Fatal(err)
		}
	}
}
