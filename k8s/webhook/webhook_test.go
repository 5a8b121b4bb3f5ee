package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// review wraps a pod in an AdmissionReview as the API server sends it.
func review(t testing.TB, pod string) []byte {
	t.Helper()
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002",` +
		`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
		`"namespace":"infer","operation":"CREATE","userInfo":{"username":"admin"},"object":` + pod + `}}`)
}

const gpuPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"hp","namespace":"infer","annotations":{"fikit.io/priority":"0","fikit.io/task-key":"resnet"}},
 "spec":{"containers":[
  {"name":"side","image":"busybox"},
  {"name":"infer","image":"x","resources":{"limits":{"nvidia.com/gpu":1}},"env":[{"name":"A","value":"1"}]}]}}`

// answer runs one review through the handler and applies its patch.
func answer(t *testing.T, h *Handler, pod string) (Response, string) {
	t.Helper()
	out, err := h.Review(review(t, pod))
	if err != nil {
		t.Fatal(err)
	}
	var rv Review
	if err := json.Unmarshal(out, &rv); err != nil {
		t.Fatal(err)
	}
	if rv.Response == nil || !rv.Response.Allowed || rv.Response.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" ||
		rv.Kind != "AdmissionReview" || rv.APIVersion != "admission.k8s.io/v1" {
		t.Fatalf("answer %s", out)
	}
	if len(rv.Response.Patch) == 0 {
		return *rv.Response, pod
	}
	if rv.Response.PatchType == nil || *rv.Response.PatchType != "JSONPatch" {
		t.Fatalf("patch type %v", rv.Response.PatchType)
	}
	return *rv.Response, applyPatch(t, pod, rv.Response.Patch)
}

func TestMutatesGPUContainer(t *testing.T) {
	h := NewHandler(DefaultConfig(), nil)
	_, got := answer(t, h, gpuPod)
	var pod map[string]any
	if err := json.Unmarshal([]byte(got), &pod); err != nil {
		t.Fatal(err)
	}
	cs := pod["spec"].(map[string]any)["containers"].([]any)
	if side := cs[0].(map[string]any); side["env"] != nil || side["volumeMounts"] != nil {
		t.Errorf("container without a GPU changed: %v", side)
	}
	infer := cs[1].(map[string]any)
	env := map[string]string{}
	for _, e := range infer["env"].([]any) {
		m := e.(map[string]any)
		env[m["name"].(string)] = m["value"].(string)
	}
	want := map[string]string{"A": "1", "LD_PRELOAD": "/run/fikit/lib/$LIB/libfikit_hook.so",
		"FIKIT_SCHEDULER": "unix:/run/fikit/sock/hooks.sock", "FIKIT_PRIORITY": "0", "FIKIT_TASK_KEY": "resnet"}
	if fmt.Sprint(env) != fmt.Sprint(want) {
		t.Errorf("env %v, want %v", env, want)
	}
	mounts := fmt.Sprint(infer["volumeMounts"])
	for _, w := range []string{"fikit-hook /run/fikit/lib true", "fikit-sock /run/fikit/sock true", "fikit-reply /run/fikit/c"} {
		f := strings.Fields(w)
		if !strings.Contains(mounts, "mountPath:"+f[1]) || !strings.Contains(mounts, "name:"+f[0]) {
			t.Errorf("mounts %s lack %s", mounts, w)
		}
	}
	if strings.Contains(mounts, "/run/fikit/c readOnly") {
		t.Errorf("reply directory read-only: %s", mounts)
	}
	if v := fmt.Sprint(pod["spec"].(map[string]any)["volumes"]); !strings.Contains(v, "path:/run/fikit/c type:Directory") {
		t.Errorf("volumes %s", v)
	}
	if a := pod["metadata"].(map[string]any)["annotations"].(map[string]any)[AnnInjected]; a != "true" {
		t.Errorf("annotation %v", a)
	}
	if c := h.Counts(); c[Mutated] != 1 {
		t.Errorf("counts %v", c)
	}
}

// TestReinvocationIsIdempotent: a mutated pod asked about again (the API
// server's reinvocation, or a second webhook's change) changes nothing;
// one whose other webhook added a GPU container gets that container only.
func TestReinvocationIsIdempotent(t *testing.T) {
	h := NewHandler(DefaultConfig(), nil)
	_, once := answer(t, h, gpuPod)
	resp, twice := answer(t, h, once)
	if len(resp.Patch) != 0 || twice != once {
		t.Fatalf("second call patched: %s", resp.Patch)
	}
	var pod map[string]any
	_ = json.Unmarshal([]byte(once), &pod)
	spec := pod["spec"].(map[string]any)
	spec["containers"] = append(spec["containers"].([]any), map[string]any{"name": "late", "resources": map[string]any{"requests": map[string]any{"nvidia.com/gpu": "1"}}})
	b, _ := json.Marshal(pod)
	resp, third := answer(t, h, string(b))
	if len(resp.Patch) == 0 || strings.Contains(string(resp.Patch), "/spec/volumes") || strings.Contains(string(resp.Patch), "containers/1") {
		t.Fatalf("late container: patch %s", resp.Patch)
	}
	if !strings.Contains(third, `"LD_PRELOAD"`) || strings.Count(third, "libfikit_hook.so") != 2 {
		t.Errorf("late container not hooked once: %s", third)
	}
	if c := h.Counts(); c[Mutated] != 2 || c[AlreadyDone] != 1 {
		t.Errorf("counts %v", c)
	}
}

// The bad-input cases of issue 35 item 6 that the webhook sees: each pod
// is allowed, and left alone with a reason counted and written on it.
func TestLeftAloneAndCounted(t *testing.T) {
	for _, c := range []struct {
		name, pod, outcome string
		annotated          bool
	}{
		{"no GPU", `{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1"}}}]}}`, NoGPU, true},
		{"zero GPUs", `{"metadata":{"name":"a","annotations":{}},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"0"}}}]}}`, NoGPU, true},
		{"opted out", `{"metadata":{"name":"a","annotations":{"fikit.io/inject":"false"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":1}}}]}}`, OptedOut, true},
		{"LD_PRELOAD from a reference", `{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","env":[{"name":"LD_PRELOAD","valueFrom":{"configMapKeyRef":{"name":"x","key":"y"}}}],"resources":{"limits":{"nvidia.com/gpu":1}}}]}}`, PreloadFromRef, true},
		{"bad priority", `{"metadata":{"name":"a","annotations":{"fikit.io/priority":"urgent"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":1}}}]}}`, BadAnnotation, true},
		{"bad weight", `{"metadata":{"name":"a","annotations":{"fikit.io/weight":"0"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":1}}}]}}`, BadAnnotation, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := NewHandler(DefaultConfig(), nil)
			_, got := answer(t, h, c.pod)
			if strings.Contains(got, "libfikit_hook.so") || strings.Contains(got, "fikit-hook") {
				t.Errorf("mutated: %s", got)
			}
			if c.annotated && !strings.Contains(got, `"fikit.io/injected":"`+c.outcome+`"`) {
				t.Errorf("no annotation %s: %s", c.outcome, got)
			}
			if n := h.Counts()[c.outcome]; n != 1 {
				t.Errorf("counts %v, want %s once", h.Counts(), c.outcome)
			}
			// Asked again, the annotation is there: nothing more to write.
			if resp, _ := answer(t, h, got); len(resp.Patch) != 0 {
				t.Errorf("second answer patched: %s", resp.Patch)
			}
		})
	}
}

// TestExistingPreload: a container that preloads its own library by value
// keeps it, the hook after it.
func TestExistingPreload(t *testing.T) {
	h := NewHandler(DefaultConfig(), nil)
	pod := `{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","env":[{"name":"LD_PRELOAD","value":"/usr/lib/libjemalloc.so:"}],"resources":{"limits":{"nvidia.com/gpu":1}}}]}}`
	_, got := answer(t, h, pod)
	if !strings.Contains(got, `"value":"/usr/lib/libjemalloc.so:/run/fikit/lib/$LIB/libfikit_hook.so"`) {
		t.Errorf("LD_PRELOAD: %s", got)
	}
	if resp, _ := answer(t, h, got); len(resp.Patch) != 0 {
		t.Errorf("second answer patched: %s", resp.Patch)
	}
}

func TestNotAPodAndUndecodable(t *testing.T) {
	h := NewHandler(DefaultConfig(), nil)
	body := strings.Replace(string(review(t, gpuPod)), `"kind":"Pod"`, `"kind":"Deployment"`, 1)
	out, err := h.Review([]byte(body))
	if err != nil || strings.Contains(string(out), "patch") {
		t.Errorf("deployment: %s, %v", out, err)
	}
	if _, err := h.Review([]byte(`{"kind":"AdmissionReview"}`)); err == nil {
		t.Error("review without a request accepted")
	}
	out, err = h.Review(review(t, `"not an object"`))
	if err != nil || !strings.Contains(string(out), `"allowed":true`) || !strings.Contains(string(out), "warnings") {
		t.Errorf("undecodable pod: %s, %v", out, err)
	}
	if c := h.Counts(); c[NotAPod] != 1 || c[Undecodable] != 2 {
		t.Errorf("counts %v", c)
	}
}

func TestHTTP(t *testing.T) {
	h := NewHandler(DefaultConfig(), nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/mutate", "application/json", strings.NewReader(string(review(t, gpuPod))))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	_, _ = fmt.Fprint(&b, readAll(t, resp))
	if !strings.Contains(b.String(), `fikit_webhook_pods_total{outcome="mutated"} 1`) {
		t.Errorf("metrics: %s", b.String())
	}
	if resp, _ := http.Get(srv.URL + "/mutate"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /mutate: %d", resp.StatusCode)
	}
}

// FuzzReview: any body is answered or refused, never a panic, and a patch
// answered applies to the pod it was made for.
func FuzzReview(f *testing.F) {
	f.Add(review(f, gpuPod))
	f.Add(review(f, `{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","env":[{"name":"LD_PRELOAD","value":"x"}],"resources":{"limits":{"nvidia.com/gpu":1}}}]}}`))
	f.Add([]byte(`{"request":{"kind":{"kind":"Pod"},"object":null}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h := NewHandler(DefaultConfig(), nil)
		out, err := h.Review(b)
		if err != nil {
			return
		}
		var rv Review
		if err := json.Unmarshal(out, &rv); err != nil || rv.Response == nil || !rv.Response.Allowed {
			t.Fatalf("answer %s", out)
		}
	})
}

func readAll(t *testing.T, r *http.Response) string {
	t.Helper()
	defer r.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// applyPatch applies a JSON Patch of add and replace operations (all the
// webhook makes) to a JSON document, as the API server would.
func applyPatch(t *testing.T, doc string, patch []byte) string {
	t.Helper()
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	var root any
	if err := json.Unmarshal([]byte(doc), &root); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		var v any
		if err := json.Unmarshal(op.Value, &v); err != nil {
			t.Fatalf("%s %s: %v", op.Op, op.Path, err)
		}
		toks := strings.Split(op.Path, "/")[1:]
		for i := range toks {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(toks[i], "~1", "/"), "~0", "~")
		}
		parent := root
		for _, tok := range toks[:len(toks)-1] {
			switch p := parent.(type) {
			case map[string]any:
				parent = p[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i >= len(p) {
					t.Fatalf("%s: bad index %q", op.Path, tok)
				}
				parent = p[i]
			default:
				t.Fatalf("%s: no parent at %q", op.Path, tok)
			}
		}
		last := toks[len(toks)-1]
		switch p := parent.(type) {
		case map[string]any:
			if _, ok := p[last]; op.Op == "replace" && !ok {
				t.Fatalf("replace of missing %s", op.Path)
			}
			p[last] = v
		case []any:
			// Appending changes the slice header: set it back in the
			// grandparent, found again from the root.
			if op.Op != "add" || last != "-" {
				i, err := strconv.Atoi(last)
				if err != nil || i >= len(p) {
					t.Fatalf("%s: bad index", op.Path)
				}
				p[i] = v
				continue
			}
			gp := root
			for _, tok := range toks[:len(toks)-2] {
				switch g := gp.(type) {
				case map[string]any:
					gp = g[tok]
				case []any:
					i, _ := strconv.Atoi(tok)
					gp = g[i]
				}
			}
			key := toks[len(toks)-2]
			switch g := gp.(type) {
			case map[string]any:
				g[key] = append(p, v)
			case []any:
				i, _ := strconv.Atoi(key)
				g[i] = append(p, v)
			}
		default:
			t.Fatalf("%s: parent is %T", op.Path, parent)
		}
	}
	b, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
