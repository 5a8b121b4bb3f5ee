package udp_test

import (
	"encoding/hex"
	"fmt"

	"github.com/fikit/fikit/udp"
)

// The datagrams of the package documentation.
func ExampleAppend() {
	reg := udp.Register{Seq: 1, TaskKey: "python3 serve.py --port 8000", PID: 4242, Priority: 0,
		DeviceUUID: [16]byte{0x5a, 0x1b, 0x6e, 0x3c, 0x94, 0x27, 0x4f, 0x1d, 0x8e, 0x0b, 0xc2, 0x7a, 0x61, 0x33, 0xd8, 0x05},
		DeviceName: "NVIDIA H100 80GB HBM3"}
	b, err := udp.Append(nil, reg)
	if err != nil {
		panic(err)
	}
	fmt.Println(hex.EncodeToString(b))
	b, _ = udp.Append(nil, udp.Grant{TaskID: 7, Seq: 300, Credit: 0})
	fmt.Println(hex.EncodeToString(b))
	// Output:
	// 99010101bc707974686f6e332073657276652e7079202d2d706f72742038303030cd109200c4105a1b6e3c94274f1d8e0bc27a6133d805b54e5649444941204831303020383047422048424d3300
	// 95010907cd012c00
}

func ExampleDecoder() {
	var d udp.Decoder // one per receive loop
	m, err := d.Decode([]byte{0x95, 0x01, 0x02, 0x03, 0xcd, 0x01, 0x2c, 0x2a})
	if err != nil {
		fmt.Println(udp.ErrorCodeOf(err), err)
		return
	}
	switch m := m.(type) {
	case *udp.LaunchNotify:
		fmt.Println("task", m.TaskID, "launch", m.Seq, "kernel", m.KernelID)
	case *udp.LaunchRequest:
		fmt.Println("request", m.Seq)
	}
	_, err = d.Decode([]byte{0x93, 0x02, 0x06, 0x01})
	fmt.Println(udp.ErrorCodeOf(err), err)
	// Output:
	// task 3 launch 300 kernel 42
	// unsupported version decode: version 2: unsupported protocol version
}

func ExampleFormat() {
	fmt.Println(udp.Format(udp.Measurements{TaskID: 1, Run: 2, Records: []udp.Record{
		{KernelID: 42, DurationNS: 15000, GapNS: 2500, Flags: udp.FlagGapSpansRunEnd}}}))
	// Output:
	// Measurements task_id=1 run=2 records=[[42,15000,2500,1]]
}
