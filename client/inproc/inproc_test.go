package inproc_test

import (
	"testing"

	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/client/transport/transporttest"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
)

func backend(opts ...inproc.Option) transporttest.Backend {
	return func(t testing.TB, o store.Options) transport.Transport {
		return inproc.New(storekit.Open(t, o), opts...)
	}
}

// TestConformance: the in-process transport, sharing the store's snapshots
// and not, passes the suite every transport runs.
func TestConformance(t *testing.T) {
	t.Run("sharing", func(t *testing.T) { transporttest.Run(t, backend()) })
	t.Run("without-sharing", func(t *testing.T) { transporttest.Run(t, backend(inproc.WithoutSharing())) })
}
