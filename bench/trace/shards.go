package trace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
)

// A sharded table is a directory of files part-NNNNN-of-MMMMM.csv.gz (or
// .csv, or .json / .json.gz), shard k holding the rows after shard k-1's:
// reading the table is reading its shards in order.
var shardName = regexp.MustCompile(`^part-(\d+)-of-(\d+)\.(csv|json)(\.gz)?$`)

// Shards are the files of one sharded table, in order.
type Shards struct {
	Table string
	Files []string
	// Index of each file, and the count every file names.
	Index []int
	Of    int
}

// ErrShardGap: a shard is missing between two present ones, which breaks
// the state machines of the tasks and machines that cross it.
var ErrShardGap = errors.New("shard missing from the middle of the table")

// FindShards lists the shards of table in dir/table. A shard missing
// between the first and the last present is an error (ErrShardGap) naming
// it; shards that do not start at 0 or stop before the last are a prefix
// or a window of the table, told in the warning returned. A table
// directory that is absent gives no shards and no error.
func FindShards(dir, table string) (Shards, string, error) {
	s := Shards{Table: table}
	tdir := filepath.Join(dir, table)
	ents, err := os.ReadDir(tdir)
	if errors.Is(err, fs.ErrNotExist) {
		return s, "", nil
	}
	if err != nil {
		return s, "", err
	}
	type shard struct {
		k    int
		name string
	}
	var found []shard
	for _, e := range ents {
		m := shardName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			continue
		}
		k, err1 := strconv.Atoi(m[1])
		of, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil || of <= 0 || k >= of {
			return s, "", fmt.Errorf("%s: not a shard name (part-K-of-N with K < N)", filepath.Join(tdir, e.Name()))
		}
		if s.Of == 0 {
			s.Of = of
		} else if of != s.Of {
			return s, "", fmt.Errorf("%s: shards of %d and of %d in one table", tdir, s.Of, of)
		}
		found = append(found, shard{k, filepath.Join(tdir, e.Name())})
	}
	slices.SortFunc(found, func(a, b shard) int { return a.k - b.k })
	for i, f := range found {
		if i > 0 && f.k == found[i-1].k {
			return s, "", fmt.Errorf("%s: shard %d twice (%s and %s)", tdir, f.k, found[i-1].name, f.name)
		}
		if i > 0 && f.k != found[i-1].k+1 {
			return s, "", fmt.Errorf("%s: %w: have %d and %d, not %d (tasks crossing it would end with no submission)",
				tdir, ErrShardGap, found[i-1].k, f.k, found[i-1].k+1)
		}
		s.Files = append(s.Files, f.name)
		s.Index = append(s.Index, f.k)
	}
	var warn string
	if n := len(found); n > 0 && (found[0].k != 0 || found[n-1].k != s.Of-1) {
		warn = fmt.Sprintf("%s: shards %d to %d of %d (a window of the table)", table, found[0].k, found[n-1].k, s.Of)
	}
	return s, warn, nil
}

// TableFiles lists the files of a table of a trace in dir, in the order to
// read them: the shards of dir/table (part-K-of-N, checked as FindShards
// does) or, when it has none, its files ending in one of exts in name
// order (BigQuery's exports number their files, e.g.
// instance_events-000000000000.json.gz); else the single file
// dir/table+ext. No file is no error: the table is absent.
func TableFiles(dir, table string, exts ...string) ([]string, string, error) {
	s, warn, err := FindShards(dir, table)
	if err != nil || len(s.Files) > 0 {
		return s.Files, warn, err
	}
	var files []string
	if ents, err := os.ReadDir(filepath.Join(dir, table)); err == nil {
		for _, e := range ents {
			if !e.IsDir() && hasExt(e.Name(), exts) {
				files = append(files, filepath.Join(dir, table, e.Name()))
			}
		}
		slices.Sort(files)
		return files, "", nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, "", err
	}
	for _, ext := range exts {
		p := filepath.Join(dir, table+ext)
		if _, err := os.Stat(p); err == nil {
			return []string{p}, "", nil
		}
	}
	return nil, "", nil
}

func hasExt(name string, exts []string) bool {
	for _, x := range exts {
		if len(name) > len(x) && name[len(name)-len(x):] == x {
			return true
		}
	}
	return false
}
