package store

import (
	"bytes"
	"cmp"
	"slices"
)

func sortExpiring(items []expiring) {
	slices.SortFunc(items, func(a, b expiring) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return bytes.Compare(a.uid[:], b.uid[:])
	})
}
