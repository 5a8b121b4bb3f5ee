package devmodel_test

import (
	"fmt"
	"time"

	"github.com/fikit/fikit/simgpu/devmodel"
)

// An event-driven loop: two contexts share the device in the timeslice model;
// the long kernel is preempted at its slice's end and resumes after the
// short one, a context switch (the legacy preset's 25 µs) apart each time.
func Example() {
	cfg, err := devmodel.Preset("legacy")
	if err != nil {
		panic(err)
	}
	dev, err := devmodel.New(cfg, 0)
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	a, _ := dev.OpenContext(100)
	b, _ := dev.OpenContext(200)
	dev.Enqueue(a, devmodel.Op{Type: devmodel.Kernel, Duration: 5 * time.Millisecond, Tag: 1}, 0)
	dev.Enqueue(b, devmodel.Op{Type: devmodel.Kernel, Duration: time.Millisecond, Tag: 2}, 0)
	for t := dev.NextEvent(); t != devmodel.Never; t = dev.NextEvent() {
		for _, s := range dev.Advance(t) {
			fmt.Printf("ctx %d kernel %d segment %d: %v-%v last=%v\n", s.Ctx, s.Tag, s.Index,
				time.Duration(s.Start), time.Duration(s.End), s.Last)
		}
	}
	dev.Retire(a) // ops hold ring slots until their owner retires them
	dev.Retire(b)
	fmt.Println(dev.Stats().Switches, "switches")
	// Output:
	// ctx 0 kernel 1 segment 0: 4µs-2.004ms last=false
	// ctx 1 kernel 2 segment 0: 2.029ms-3.029ms last=true
	// ctx 0 kernel 1 segment 1: 3.054ms-6.054ms last=true
	// 2 switches
}
