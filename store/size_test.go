package store_test

import (
	"testing"

	"github.com/fikit/fikit/store/storetest"
)

// SizeBytes (the daemon's fikit_store_bytes) is the store's size on disk:
// above zero once something is written. Badger's own Size() is always zero
// with its metrics off, as the daemon runs it: the 32-minute soak read 0
// throughout.
func TestBadgerSizeBytes(t *testing.T) {
	b := openBadger(t, t.TempDir())
	defer b.Close()
	for i := range 20 {
		if err := b.Put(storetest.Profile("svc", "NVIDIA H100", uint64(i+1), 50)); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.SizeBytes(); n <= 0 {
		t.Fatalf("SizeBytes = %d after 20 writes, want the bytes on disk", n)
	}
	b.Close()
	if n := b.SizeBytes(); n != 0 {
		t.Errorf("SizeBytes = %d after Close, want 0", n)
	}
}
