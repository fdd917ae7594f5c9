package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/randfill"

	"github.com/mpijob/mpijob/pkg/diagnose"
)

// realJobSet is the JobSet Trainer made for an MPI job of one Launcher
// and two Workers on the local cluster (kubectl get jobset -o json).
func realJobSet(tb testing.TB) []byte {
	tb.Helper()
	data, err := os.ReadFile("testdata/jobset.json")
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// codecs are client-go's serializers as the cache used them before
// (controller-runtime's: without conversion).
func codecs(tb testing.TB) serializer.WithoutConversionCodecFactory {
	tb.Helper()
	scheme, err := newScheme()
	if err != nil {
		tb.Fatal(err)
	}
	return serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}
}

// mediaDecoders are ns's serializer for mediaType (the envelope's, for a
// stream) and its decoder of gv's objects.
func mediaDecoders(tb testing.TB, ns runtime.NegotiatedSerializer, mediaType string, gv schema.GroupVersion) (runtime.SerializerInfo, runtime.Decoder) {
	tb.Helper()
	info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil {
		tb.Fatalf("no %s serializer", mediaType)
	}
	return info, ns.DecoderToVersion(info.Serializer, gv)
}

// objectDecoders are the decoder of gv's objects in mediaType that own
// makes of client-go's serializers, and client-go's.
func objectDecoders(tb testing.TB, own func(runtime.NegotiatedSerializer) runtime.NegotiatedSerializer, mediaType string, gv schema.GroupVersion) (thin, full runtime.Decoder) {
	tb.Helper()
	_, thin = mediaDecoders(tb, own(codecs(tb)), mediaType, gv)
	_, full = mediaDecoders(tb, codecs(tb), mediaType, gv)
	return thin, full
}

// decodeBoth is data as full and thin decode it, neither failing.
func decodeBoth(t *testing.T, thin, full runtime.Decoder, data []byte) (want, got runtime.Object) {
	t.Helper()
	want, _, err := full.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err = thin.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return want, got
}

// decoders are the manager's decoder of JobSets and client-go's.
func decoders(tb testing.TB) (thin, full runtime.Decoder) {
	tb.Helper()
	return objectDecoders(tb, jobSetSerializer, runtime.ContentTypeJSON, jobsetv1alpha2.GroupVersion)
}

// benchmarkWatchEvent decodes frame, one watch event in mediaType, as the
// cache's informer does (the envelope, then the object), with client-go's
// decoders and with own's.
func benchmarkWatchEvent(b *testing.B, frame []byte, own func(runtime.NegotiatedSerializer) runtime.NegotiatedSerializer, mediaType string, gv schema.GroupVersion) {
	for _, c := range []struct {
		name string
		ns   runtime.NegotiatedSerializer
	}{{"client-go", codecs(b)}, {"thin", own(codecs(b))}} {
		info, objects := mediaDecoders(b, c.ns, mediaType, gv)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				var e metav1.WatchEvent
				if _, _, err := info.StreamSerializer.Decode(frame, nil, &e); err != nil {
					b.Fatal(err)
				}
				if _, err := runtime.Decode(objects, e.Object.Raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// trimmed is what the cache keeps of a JobSet client-go decoded whole.
func trimmed(tb testing.TB, js *jobsetv1alpha2.JobSet) *jobsetv1alpha2.JobSet {
	tb.Helper()
	out, err := diagnose.TrimJobSet(js.DeepCopy())
	if err != nil {
		tb.Fatal(err)
	}
	return out.(*jobsetv1alpha2.JobSet)
}

// The cache keeps the same JobSet whichever decoder read it: every field
// but the pod templates (which TrimJobSet drops from the whole one).
func TestJobSetDecoderKeepsWhatTheCacheKeeps(t *testing.T) {
	thin, full := decoders(t)
	filler := randfill.New().NilChance(0.2).NumElements(1, 3).RandSource(rand.NewSource(1)).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1000), resource.DecimalSI)
		},
		func(v *intstr.IntOrString, c randfill.Continue) { *v = intstr.FromInt32(c.Int31n(100)) },
		func(tm *metav1.Time, c randfill.Continue) { *tm = metav1.Unix(c.Int63n(1<<31), 0) },
		func(e *runtime.RawExtension, c randfill.Continue) { e.Raw = []byte(`{"a":1}`) },
		func(f *metav1.FieldsV1, c randfill.Continue) { f.SetRawString(`{"f:a":{}}`) },
	)
	inputs := map[string][]byte{"real JobSet": realJobSet(t)}
	for i := range 20 {
		js := &jobsetv1alpha2.JobSet{}
		filler.Fill(js)
		js.TypeMeta = metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"}
		data, err := json.Marshal(js)
		if err != nil {
			t.Fatal(err)
		}
		inputs[fmt.Sprintf("random JobSet %d", i)] = data
	}
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			want, got := decodeBoth(t, thin, full, data)
			w := trimmed(t, want.(*jobsetv1alpha2.JobSet))
			g := trimmed(t, got.(*jobsetv1alpha2.JobSet))
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("the cache's JobSet (-client-go, +thin):\n%s", diff)
			}
			if len(w.Spec.ReplicatedJobs) == 0 && name == "real JobSet" {
				t.Error("the real JobSet has no replicated Jobs")
			}
			// Decoded into a given JobSet, as a list's item is.
			into := &jobsetv1alpha2.JobSet{Spec: jobsetv1alpha2.JobSetSpec{Suspend: new(bool)}}
			if _, _, err := thin.Decode(data, nil, into); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(w, trimmed(t, into)); diff != "" {
				t.Errorf("decoded into a JobSet (-client-go, +thin):\n%s", diff)
			}
		})
	}
}

// The pod templates and managedFields are read past, never built: a
// template client-go cannot decode does not stop the thin decoder.
func TestJobSetDecoderNeverBuildsPodTemplates(t *testing.T) {
	thin, full := decoders(t)
	data := bytes.Replace(realJobSet(t), []byte(`"containers": [`), []byte(`"containers": "not a list", "x": [`), 1)
	if bytes.Equal(data, realJobSet(t)) {
		t.Fatal("the real JobSet has no containers to spoil")
	}
	if _, _, err := full.Decode(data, nil, nil); err == nil {
		t.Fatal("client-go decoded a container list that is a string")
	}
	got, _, err := thin.Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("the pod template was decoded: %v", err)
	}
	if mf := got.(*jobsetv1alpha2.JobSet).ManagedFields; mf != nil {
		t.Errorf("managedFields kept: %v", mf)
	}
	for _, rj := range got.(*jobsetv1alpha2.JobSet).Spec.ReplicatedJobs {
		if diff := cmp.Diff(corev1.PodTemplateSpec{}, rj.Template.Spec.Template); diff != "" {
			t.Errorf("%s keeps a pod template:\n%s", rj.Name, diff)
		}
	}
}

// What is not a JobSet goes to client-go's decoder: its objects and its
// errors.
func TestJobSetDecoderLeavesTheRestToClientGo(t *testing.T) {
	thin, full := decoders(t)
	for name, data := range map[string]string{
		"a Status":                    `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Expired","code":410}`,
		"a JobSet of another version": `{"kind":"JobSet","apiVersion":"jobset.x-k8s.io/v1alpha1","metadata":{"name":"a"}}`,
		"no kind":                     `{"metadata":{"name":"a"}}`,
		"not JSON":                    `{"kind":"JobSet",`,
		"a wrong type":                `{"kind":"JobSet","apiVersion":"jobset.x-k8s.io/v1alpha2","metadata":{"name":3}}`,
	} {
		t.Run(name, func(t *testing.T) {
			want, _, wantErr := full.Decode([]byte(data), nil, nil)
			got, _, err := thin.Decode([]byte(data), nil, nil)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("error %v, client-go's %v", err, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-client-go, +thin):\n%s", diff)
			}
		})
	}
}

// The JobSets' informer lists and watches through the thin decoder, against
// an API server that answers as the real one does.
func TestJobSetWatch(t *testing.T) {
	data := realJobSet(t)
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	event := func(typ string, rv string) []byte {
		obj["metadata"].(map[string]any)["resourceVersion"] = rv
		data, err := json.Marshal(map[string]any{"type": typ, "object": obj})
		if err != nil {
			t.Fatal(err)
		}
		return append(data, '\n')
	}
	var (
		mu       sync.Mutex
		requests []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		write := func(b []byte) {
			if _, err := w.Write(b); err != nil {
				t.Error(err)
			}
		}
		if r.URL.Query().Get("watch") != "true" {
			obj["metadata"].(map[string]any)["resourceVersion"] = "10"
			list, err := json.Marshal(map[string]any{"kind": "JobSetList", "apiVersion": "jobset.x-k8s.io/v1alpha2", "metadata": map[string]any{"resourceVersion": "11"}, "items": []any{obj}})
			if err != nil {
				t.Error(err)
			}
			write(list)
			return
		}
		write(event("MODIFIED", "12"))
		write([]byte(`{"type":"BOOKMARK","object":{"kind":"JobSet","apiVersion":"jobset.x-k8s.io/v1alpha2","metadata":{"resourceVersion":"13"}}}` + "\n"))
		write([]byte(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","reason":"Expired","code":410}}` + "\n"))
	}))
	defer srv.Close()
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	lw, err := jobSetWatch(&rest.Config{Host: srv.URL}, scheme)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, full := decoders(t)
	want, _, err := full.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := trimmed(t, want.(*jobsetv1alpha2.JobSet))

	w.ResourceVersion = "10"
	if diff := cmp.Diff(w, trimmed(t, listedOne(ctx, t, lw).(*jobsetv1alpha2.JobSet))); diff != "" {
		t.Errorf("listed (-client-go, +thin):\n%s", diff)
	}

	got := watchedEvents(ctx, t, lw, "11", func(typ watch.EventType, o runtime.Object) {
		js, ok := o.(*jobsetv1alpha2.JobSet)
		switch {
		case !ok:
			t.Errorf("a %T in the watch", o)
		case typ == watch.Modified:
			w.ResourceVersion = "12"
			if diff := cmp.Diff(w, trimmed(t, js)); diff != "" {
				t.Errorf("watched (-client-go, +thin):\n%s", diff)
			}
		}
	})
	if diff := cmp.Diff([]string{"MODIFIED 12", "BOOKMARK 13", "ERROR Expired"}, got); diff != "" {
		t.Errorf("events (-want, +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requests) != 2 || !strings.Contains(requests[1], "allowWatchBookmarks=true") || !strings.Contains(requests[1], "watch=true") || !strings.HasPrefix(requests[0], "/apis/jobset.x-k8s.io/v1alpha2/jobsets?") {
		t.Errorf("requests %q", requests)
	}
}

// listedOne lists lw from resource version 0 and returns the one object
// of the list, which must be at resource version 11.
func listedOne(ctx context.Context, t *testing.T, lw *toolscache.ListWatch) runtime.Object {
	t.Helper()
	list, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	if rv := list.(metav1.ListInterface).GetResourceVersion(); rv != "11" || len(items) != 1 {
		t.Fatalf("list %s with %d objects", rv, len(items))
	}
	return items[0]
}

// watchedEvents watches lw from rv until the server ends the watch, and
// says each event by its type and its object's resource version (a
// Status's reason); each object that is not a Status goes to check.
func watchedEvents(ctx context.Context, t *testing.T, lw *toolscache.ListWatch, rv string, check func(watch.EventType, runtime.Object)) []string {
	t.Helper()
	wi, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer wi.Stop()
	var got []string
	for e := range wi.ResultChan() {
		if s, ok := e.Object.(*metav1.Status); ok {
			got = append(got, string(e.Type)+" "+string(s.Reason))
			continue
		}
		if o, ok := e.Object.(metav1.Object); ok {
			got = append(got, string(e.Type)+" "+o.GetResourceVersion())
		}
		check(e.Type, e.Object)
	}
	return got
}

// Only the JobSets' and the pods' informers read through their own
// decoders.
func TestNewInformer(t *testing.T) {
	var jobSets, pods, other toolscache.ListWatch
	build := newInformer(&jobSets, &pods)
	for name, tc := range map[string]struct {
		obj  runtime.Object
		want *toolscache.ListWatch
	}{
		"JobSet": {&jobsetv1alpha2.JobSet{}, &jobSets},
		"Pod":    {&corev1.Pod{}, &pods},
		"Node":   {&corev1.Node{}, &other},
	} {
		t.Run(name, func(t *testing.T) {
			inf := build(&other, tc.obj, 0, toolscache.Indexers{})
			if inf == nil {
				t.Fatal("no informer")
			}
			// The informer's ListerWatcher is not exported; its source is
			// what it lists or watches from (a watch that lists, by
			// default).
			var calls atomic.Int32
			tc.want.ListWithContextFunc = func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				calls.Add(1)
				return nil, fmt.Errorf("listed")
			}
			tc.want.WatchFuncWithContext = func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				calls.Add(1)
				return nil, fmt.Errorf("watched")
			}
			defer func() { tc.want.ListWithContextFunc, tc.want.WatchFuncWithContext = nil, nil }()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			go inf.RunWithContext(ctx)
			for calls.Load() == 0 && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			if calls.Load() == 0 {
				t.Errorf("the %s informer did not list from its ListWatch", name)
			}
		})
	}
}

// BenchmarkJobSetWatchEvent decodes one watch event of a real JobSet as
// the cache's informer does: the envelope, then the object.
func BenchmarkJobSetWatchEvent(b *testing.B) {
	var obj json.RawMessage = realJobSet(b)
	frame, err := json.Marshal(map[string]any{"type": "MODIFIED", "object": obj})
	if err != nil {
		b.Fatal(err)
	}
	benchmarkWatchEvent(b, frame, jobSetSerializer, runtime.ContentTypeJSON, jobsetv1alpha2.GroupVersion)
}
