package tests

// The fault campaign (issue 11), as code. Each scenario runs in `make test`
// at a small, bounded scale and in `make faults` at full scale
// (FIKIT_FAULTS=full), which also collects one summary row per scenario
// into the table it prints (FIKIT_FAULTS_REPORT names the file). Everything
// runs on 127.0.0.1 and simgpu.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultScale is how many cycles or clients each scenario runs.
type faultScale struct {
	full              bool
	restarts, kills   int
	clients           int
	restartMeasureFor time.Duration
}

func faultsScale() faultScale {
	if os.Getenv("FIKIT_FAULTS") == "full" {
		return faultScale{full: true, restarts: 20, kills: 20, clients: 64, restartMeasureFor: 2 * time.Second}
	}
	return faultScale{restarts: 3, kills: 3, clients: 8, restartMeasureFor: time.Second}
}

var faultReportMu sync.Mutex

// faultReport logs a scenario's summary row and, under `make faults`,
// appends it to the campaign table: | scenario | scale | result | figures |.
func faultReport(t testing.TB, scenario, scale, result, figures string) {
	t.Helper()
	row := fmt.Sprintf("| %s | %s | %s | %s |", scenario, scale, result, figures)
	t.Log(row)
	path := os.Getenv("FIKIT_FAULTS_REPORT")
	if path == "" {
		return
	}
	faultReportMu.Lock()
	defer faultReportMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Errorf("fault report: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, row)
}

// verdict is "pass" or "FAIL" as the test stands now.
func verdict(t testing.TB) string {
	if t.Failed() {
		return "FAIL"
	}
	return "pass"
}

// freeTCPAddr returns a loopback TCP address nobody listens on right now.
func freeTCPAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// metrics reads the daemon's Prometheus metrics from --metrics-listen addr:
// name (labels included) → value.
func metrics(t testing.TB, addr string) map[string]float64 {
	t.Helper()
	return metricsVia(t, &http.Client{Timeout: 10 * time.Second}, "http://"+addr+"/metrics")
}

// adminMetrics reads them over the admin socket of the daemon on dataDir
// (reachable from any network namespace).
func adminMetrics(t testing.TB, dataDir string) map[string]float64 {
	t.Helper()
	sock := filepath.Join(dataDir, "fikit.sock")
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	return metricsVia(t, c, "http://fikit/metrics")
}

func metricsVia(t testing.TB, c *http.Client, url string) map[string]float64 {
	t.Helper()
	// Each call's connection is closed: an idle one would count among the
	// daemon's descriptors and goroutines until its idle timeout.
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return out
}
