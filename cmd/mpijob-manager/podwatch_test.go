package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/randfill"

	"github.com/mpijob/mpijob/pkg/diagnose"
)

// realPods are a Launcher and a Worker of MPI jobs on the local cluster
// (kubectl get pod -o json --show-managed-fields; the Worker is the one
// pkg/diagnose's cache tests read).
func realPods(tb testing.TB) map[string]*corev1.Pod {
	tb.Helper()
	out := map[string]*corev1.Pod{}
	for name, file := range map[string]string{"launcher": "testdata/launcher.json", "worker": "../../pkg/diagnose/testdata/worker-pod.json"} {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		obj, _, err := codecs(tb).UniversalDeserializer().Decode(data, nil, &corev1.Pod{})
		if err != nil {
			tb.Fatal(err)
		}
		p := obj.(*corev1.Pod)
		p.TypeMeta = metav1.TypeMeta{} // as decoded from the API server
		out["real "+name] = p
	}
	return out
}

// podDecoders are the manager's decoder of pods and client-go's.
func podDecoders(tb testing.TB) (thin, full runtime.Decoder) {
	tb.Helper()
	return objectDecoders(tb, podSerializer, runtime.ContentTypeProtobuf, corev1.SchemeGroupVersion)
}

// encodeProto is obj as the API server sends it in protobuf.
func encodeProto(tb testing.TB, obj runtime.Object) []byte {
	tb.Helper()
	full := codecs(tb)
	info, _ := runtime.SerializerInfoForMediaType(full.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	data, err := runtime.Encode(full.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), obj)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// trimmedPod is what the cache keeps of a pod.
func trimmedPod(tb testing.TB, p *corev1.Pod) *corev1.Pod {
	tb.Helper()
	out, err := diagnose.TrimPod(p.DeepCopy())
	if err != nil {
		tb.Fatal(err)
	}
	return out.(*corev1.Pod)
}

// randomPods are n pods with every field filled at random, half of them a
// JobSet's (with the labels and annotation the cache keeps) and some of
// their volumes claims.
func randomPods(tb testing.TB, n int) []*corev1.Pod {
	tb.Helper()
	filler := randfill.New().NilChance(0.2).NumElements(1, 3).RandSource(rand.NewSource(1)).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1000), resource.DecimalSI)
		},
		func(v *intstr.IntOrString, c randfill.Continue) { *v = intstr.FromInt32(c.Int31n(100)) },
		func(tm *metav1.Time, c randfill.Continue) { *tm = metav1.Unix(c.Int63n(1<<31), 0) },
		func(f *metav1.FieldsV1, c randfill.Continue) { f.SetRawString(`{"f:a":{}}`) },
		func(vs *corev1.VolumeSource, c randfill.Continue) {
			switch c.Intn(3) {
			case 0:
				vs.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.String(8), ReadOnly: c.Bool()}
			case 1:
				vs.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: c.String(8)}}
			default:
				vs.EmptyDir = &corev1.EmptyDirVolumeSource{}
			}
		},
	)
	out := make([]*corev1.Pod, n)
	for i := range out {
		p := &corev1.Pod{}
		filler.Fill(p)
		if i%2 == 0 {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			for j, k := range diagnose.KeptPodLabels {
				if i%3 != j {
					p.Labels[k] = fmt.Sprint(i)
				}
			}
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[diagnose.KeptPodAnnotations[0]] = fmt.Sprint(i)
		}
		out[i] = p
	}
	return out
}

// The cache keeps the same pod whichever decoder read it.
func TestPodDecoderKeepsWhatTheCacheKeeps(t *testing.T) {
	thin, full := podDecoders(t)
	pods := realPods(t)
	for i, p := range randomPods(t, 30) {
		pods[fmt.Sprintf("random pod %d", i)] = p
	}
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
	for name, p := range pods {
		list.Items = append(list.Items, *p)
		t.Run(name, func(t *testing.T) {
			data := encodeProto(t, p)
			want, got := decodeBoth(t, thin, full, data)
			w := trimmedPod(t, want.(*corev1.Pod))
			if diff := cmp.Diff(w, trimmedPod(t, got.(*corev1.Pod))); diff != "" {
				t.Errorf("the cache's pod (-client-go, +thin):\n%s", diff)
			}
			if strings.HasPrefix(name, "real") && (len(w.Spec.Containers) == 0 || w.Status.Phase == "") {
				t.Errorf("the real pod has no containers or phase: %+v", w)
			}
			// Decoded into a given pod, as the informer's list does.
			into := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "stale", Containers: []corev1.Container{{Name: "stale"}}}}
			if _, _, err := thin.Decode(data, nil, into); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(w, trimmedPod(t, into)); diff != "" {
				t.Errorf("decoded into a pod (-client-go, +thin):\n%s", diff)
			}
		})
	}
	t.Run("a list", func(t *testing.T) {
		data := encodeProto(t, list)
		want, got := &corev1.PodList{}, &corev1.PodList{}
		if _, _, err := full.Decode(data, nil, want); err != nil {
			t.Fatal(err)
		}
		if _, _, err := thin.Decode(data, nil, got); err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != "7" || len(got.Items) != len(pods) {
			t.Fatalf("list %q of %d pods, want 7 and %d", got.ResourceVersion, len(got.Items), len(pods))
		}
		for i := range want.Items {
			if diff := cmp.Diff(trimmedPod(t, &want.Items[i]), trimmedPod(t, &got.Items[i])); diff != "" {
				t.Errorf("listed pod %s (-client-go, +thin):\n%s", want.Items[i].Name, diff)
			}
		}
	})
}

// appendField is data with one more length-delimited field num holding v.
func appendField(data []byte, num protowire.Number, v []byte) []byte {
	data = protowire.AppendTag(data, num, protowire.BytesType)
	return protowire.AppendBytes(data, v)
}

// What the cache drops is stepped over, never built: a pod whose
// container has an environment variable and a managedFields entry
// client-go cannot decode is decoded, and neither is kept.
func TestPodDecoderNeverBuildsWhatTheCacheDrops(t *testing.T) {
	thin, full := podDecoders(t)
	p := realPods(t)["real worker"]
	raw, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// A name (1, a string) sent as a number: not an EnvVar, not a
	// ManagedFieldsEntry. Appended fields merge into the pod: one more
	// container with that variable, one more managedFields entry.
	bad := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 7)
	raw = appendField(raw, 2, appendField(nil, 2, appendField(nil, 7, bad)))
	raw = appendField(raw, 1, appendField(nil, 17, bad))
	unknown := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Pod"}, Raw: raw}
	envelope, err := unknown.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	data := append(bytes.Clone(protoMagic), envelope...)
	if _, _, err := full.Decode(data, nil, nil); err == nil {
		t.Fatal("client-go decoded an environment variable whose name is a number")
	}
	got, _, err := thin.Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("what the cache drops was decoded: %v", err)
	}
	g := got.(*corev1.Pod)
	if g.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", g.ManagedFields)
	}
	if n := len(g.Spec.Containers); n != len(p.Spec.Containers)+1 {
		t.Errorf("%d containers, want %d and the appended one", n, len(p.Spec.Containers))
	}
	for _, c := range g.Spec.Containers {
		if c.Env != nil || c.VolumeMounts != nil || c.SecurityContext != nil {
			t.Errorf("container %q keeps what the cache drops: %+v", c.Name, c)
		}
	}
	if len(p.Spec.Containers) == 0 || p.Spec.Containers[0].Env == nil || p.ManagedFields == nil {
		t.Error("the real Worker has no environment or managedFields to drop")
	}
}

// What is not a protobuf pod goes to client-go's decoder: its objects and
// its errors.
func TestPodDecoderLeavesTheRestToClientGo(t *testing.T) {
	thin, full := podDecoders(t)
	pod := encodeProto(t, realPods(t)["real worker"])
	truncated := bytes.Clone(pod[:len(pod)/2])
	otherVersion := bytes.Replace(bytes.Clone(pod), []byte("\n\x02v1\x12\x03Pod"), []byte("\n\x02v2\x12\x03Pod"), 1)
	if bytes.Equal(otherVersion, pod) {
		t.Fatal("the pod's envelope did not name v1 Pod")
	}
	// A pod whose spec (2, a message) is sent as a number: the generated
	// decoder refuses it, and client-go's error is the one returned.
	raw, err := realPods(t)["real worker"].Marshal()
	if err != nil {
		t.Fatal(err)
	}
	unknown := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Pod"}, Raw: protowire.AppendVarint(protowire.AppendTag(raw, 2, protowire.VarintType), 1)}
	envelope, err := unknown.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"a spec that is a number":  append(bytes.Clone(protoMagic), envelope...),
		"a Status":                 encodeProto(t, &metav1.Status{Status: metav1.StatusFailure, Message: "too old", Reason: metav1.StatusReasonExpired, Code: 410}),
		"a node":                   encodeProto(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}),
		"a pod of another version": otherVersion,
		"a pod in JSON":            []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}`),
		"cut short":                truncated,
		"nothing but the prefix":   bytes.Clone(protoMagic),
	} {
		t.Run(name, func(t *testing.T) {
			want, _, wantErr := full.Decode(data, nil, nil)
			got, _, err := thin.Decode(data, nil, nil)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("error %v, client-go's %v", err, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-client-go, +thin):\n%s", diff)
			}
		})
	}
}

// podAPI is an API server that answers the pods' list with list and
// each watch with events (protobuf, framed by their length, as the real one
// does), then holds the watch open until the client goes when hold is set.
// It returns the pods' ListWatch against it, and the requests it had.
func podAPI(t *testing.T, list *corev1.PodList, events func(*http.Request) []metav1.WatchEvent, hold bool) (*toolscache.ListWatch, func() []string) {
	t.Helper()
	var (
		mu       sync.Mutex
		requests []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Accept"))
		mu.Unlock()
		if r.URL.Query().Get("watch") != "true" {
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
			if _, err := w.Write(encodeProto(t, list)); err != nil {
				t.Error(err)
			}
			return
		}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf+";stream=watch")
		frames := protobuf.LengthDelimitedFramer.NewFrameWriter(w)
		for _, e := range events(r) {
			data, err := e.Marshal()
			if err != nil {
				t.Error(err)
			}
			if _, err := frames.Write(data); err != nil {
				t.Error(err)
			}
		}
		w.(http.Flusher).Flush()
		if hold {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	lw, err := podWatch(&rest.Config{Host: srv.URL}, scheme)
	if err != nil {
		t.Fatal(err)
	}
	return lw, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(requests)
	}
}

// protoEvent is a watch event of obj, in protobuf.
func protoEvent(t *testing.T, typ watch.EventType, obj runtime.Object) metav1.WatchEvent {
	return metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: encodeProto(t, obj)}}
}

// withVersion is p at resource version rv.
func withVersion(p *corev1.Pod, rv string) *corev1.Pod {
	p = p.DeepCopy()
	p.ResourceVersion = rv
	return p
}

// initialEventsEnd is the bookmark that ends a watch's initial events (the
// reflector lists by watching, and waits for it).
func initialEventsEnd(rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv, Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
}

// thinOnly fails t when p was decoded whole: what the pods' watch sends
// is already thin.
func thinOnly(t *testing.T, how string, p *corev1.Pod) {
	t.Helper()
	if p.ManagedFields != nil || len(p.Spec.Containers) == 0 || p.Spec.Containers[0].Env != nil {
		t.Errorf("%s pod was decoded whole", how)
	}
}

// The pods' informer lists and watches through the thin decoder, against
// an API server that answers as the real one does.
func TestPodWatch(t *testing.T) {
	pod := realPods(t)["real worker"]
	lw, requests := podAPI(t, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "11"}, Items: []corev1.Pod{*withVersion(pod, "10")}},
		func(*http.Request) []metav1.WatchEvent {
			return []metav1.WatchEvent{
				protoEvent(t, watch.Modified, withVersion(pod, "12")),
				protoEvent(t, watch.Bookmark, initialEventsEnd("13")),
				protoEvent(t, watch.Deleted, withVersion(pod, "14")),
				protoEvent(t, watch.Error, &metav1.Status{Status: metav1.StatusFailure, Message: "too old", Reason: metav1.StatusReasonExpired, Code: 410}),
			}
		}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := trimmedPod(t, pod)

	listed := listedOne(ctx, t, lw).(*corev1.Pod)
	thinOnly(t, "the listed", listed)
	w.ResourceVersion = "10"
	if diff := cmp.Diff(w, trimmedPod(t, listed)); diff != "" {
		t.Errorf("listed (-client-go, +thin):\n%s", diff)
	}

	got := watchedEvents(ctx, t, lw, "11", func(typ watch.EventType, o runtime.Object) {
		p, ok := o.(*corev1.Pod)
		switch {
		case !ok:
			t.Errorf("a %T in the watch", o)
		case typ == watch.Bookmark:
			if p.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				t.Errorf("the bookmark lost its %s annotation: %v", metav1.InitialEventsAnnotationKey, p.Annotations)
			}
		default:
			thinOnly(t, "a watched", p)
			w.ResourceVersion = p.ResourceVersion
			if diff := cmp.Diff(w, trimmedPod(t, p)); diff != "" {
				t.Errorf("watched (-client-go, +thin):\n%s", diff)
			}
		}
	})
	if diff := cmp.Diff([]string{"MODIFIED 12", "BOOKMARK 13", "DELETED 14", "ERROR Expired"}, got); diff != "" {
		t.Errorf("events (-want, +got):\n%s", diff)
	}
	if r := requests(); len(r) != 2 || !strings.Contains(r[1], "allowWatchBookmarks=true") || !strings.Contains(r[1], "watch=true") ||
		!strings.HasPrefix(r[0], "/api/v1/pods?") || !strings.HasSuffix(r[0], " "+runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON) {
		t.Errorf("requests %q", r)
	}
}

// The cache's informer syncs through the pods' watch as it lists on a
// real API server: by watching, its initial events ended by a bookmark
// that says so (the annotation the cache itself drops).
func TestPodInformerSyncs(t *testing.T) {
	pod := withVersion(realPods(t)["real worker"], "10")
	lw, requests := podAPI(t, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "11"}, Items: []corev1.Pod{*pod}},
		func(r *http.Request) []metav1.WatchEvent {
			if r.URL.Query().Get("sendInitialEvents") != "true" {
				return nil
			}
			return []metav1.WatchEvent{protoEvent(t, watch.Added, pod), protoEvent(t, watch.Bookmark, initialEventsEnd("11"))}
		}, true)
	inf := newInformer(&toolscache.ListWatch{}, lw)(&toolscache.ListWatch{}, &corev1.Pod{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatalf("the informer did not sync; requests %q", requests())
	}
	items := inf.GetStore().List()
	if len(items) != 1 || items[0].(*corev1.Pod).Name != pod.Name {
		t.Fatalf("the informer holds %v", items)
	}
	thinOnly(t, "the informer's", items[0].(*corev1.Pod))
	if r := requests(); len(r) == 0 || !strings.Contains(r[0], "sendInitialEvents=true") {
		t.Errorf("the informer did not list by watching: requests %q", r)
	}
}

// BenchmarkPodWatchEvent decodes one watch event of a real Worker as the
// cache's informer does: the envelope, then the object.
func BenchmarkPodWatchEvent(b *testing.B) {
	e := metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: encodeProto(b, realPods(b)["real worker"])}}
	frame, err := e.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	benchmarkWatchEvent(b, frame, podSerializer, runtime.ContentTypeProtobuf, corev1.SchemeGroupVersion)
}
