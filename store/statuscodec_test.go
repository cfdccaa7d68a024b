package store

import (
	"math"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestStatusCodecMatchesProto: the hand-written status encoding decodes,
// with the real protobuf decoder, to exactly the message StatusProto builds,
// for any task status.
func TestStatusCodecMatchesProto(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		i64 := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64(), rapid.Just(int64(math.MinInt64)), rapid.Int64Range(-1, 1))
		task := &txn.Task{
			State:     omegav1.TaskState(rapid.Int32Range(0, 7).Draw(rt, "state")),
			Scheduler: rapid.SampledFrom([]string{"", "batch-0", "ü"}).Draw(rt, "scheduler"),
			Assigned:  i64.Draw(rt, "assigned"),
			Started:   i64.Draw(rt, "started"),
			Finished:  i64.Draw(rt, "finished"),
			Evictions: rapid.Int32().Draw(rt, "evictions"),
			Message:   rapid.String().Draw(rt, "message"),
			Claimed: txn.Resources{
				CPU:    i64.Draw(rt, "cpu"),
				Memory: i64.Draw(rt, "mem"),
			},
		}
		if rapid.Bool().Draw(rt, "placed") {
			copy(task.Machine[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "machine"))
		}
		if n := rapid.IntRange(0, 3).Draw(rt, "ext"); n > 0 {
			task.Claimed.Ext = map[string]int64{}
			for j := range n {
				task.Claimed.Ext[rapid.SampledFrom([]string{"gpu", "ssd", "a", ""}).Draw(rt, "name")] = i64.Draw(rt, "v") + int64(j)
			}
		}
		got := &omegav1.TaskStatus{}
		if err := proto.Unmarshal(appendTaskStatus(nil, task), got); err != nil {
			rt.Fatalf("decode: %v", err)
		}
		want := task.StatusProto()
		if task.Machine == uuid.Nil {
			want.MachineUid = ""
		}
		if !proto.Equal(got, want) {
			rt.Fatalf("decoded %v\nwant    %v", got, want)
		}
	})
}
