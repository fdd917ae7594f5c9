package main

import (
	"context"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kjson "sigs.k8s.io/json"
)

// The manager's cache watches every JobSet of the cluster, and a JobSet is
// mostly its pod templates and managedFields, which no reader of the cache
// uses (diagnose.TrimJobSet and the default transform drop them).
// CustomResources have no protobuf encoding, so client-go's JSON decoder
// read every JobSet change three times: the watch event's envelope and the
// object each scanned whole to find their kind, then the object decoded
// whole, only for the transforms to drop most of it (about a fifth of the
// leader's CPU went to the JSON watch streams at 200 × 8,
// docs/development.md).
//
// The JobSet informer lists and watches through its own REST client whose
// decoder knows what it is reading: the envelope is decoded as what it is
// (a metav1.WatchEvent), and a JobSet into a type that declares every
// field but the pod templates and managedFields (thinJobSet), which the
// JSON decoder skips over without building. Anything else the API server
// sends (a Status, an object of another kind, a malformed one) goes to
// client-go's decoder, as before.

// jobSetWatch lists and watches the cluster's JobSets for the manager's
// cache, as controller-runtime's own structured ListWatch does (bookmarks
// on; the cache has no namespace or selector restriction, and one added for
// JobSets must be added here too).
func jobSetWatch(cfg *rest.Config, scheme *runtime.Scheme) (*toolscache.ListWatch, error) {
	return listWatch(cfg, scheme, jobsetv1alpha2.GroupVersion, "/apis", runtime.ContentTypeJSON, runtime.ContentTypeJSON,
		jobSetSerializer, "jobsets", func() runtime.Object { return &jobsetv1alpha2.JobSetList{} })
}

// listWatch lists and watches resource of gv across the cluster through a
// REST client of its own that reads with own's serializer made of
// scheme's codecs (controller-runtime's: without conversion), as
// controller-runtime's structured ListWatch does (bookmarks on).
func listWatch(cfg *rest.Config, scheme *runtime.Scheme, gv schema.GroupVersion, apiPath, contentType, accept string,
	own func(runtime.NegotiatedSerializer) runtime.NegotiatedSerializer, resource string, newList func() runtime.Object) (*toolscache.ListWatch, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = apiPath
	c.ContentType = contentType
	c.AcceptContentTypes = accept
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c.NegotiatedSerializer = own(serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)})
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := newList()
			if err := rc.Get().Resource(resource).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(list); err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			opts.AllowWatchBookmarks = true
			return rc.Get().Resource(resource).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
		},
	}, nil
}

// newInformer is the cache's NewInformer: the JobSets' informer reads
// through jobSets and the pods' through pods, every other one through the
// ListWatch controller-runtime made for it.
func newInformer(jobSets, pods toolscache.ListerWatcher) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		switch obj.(type) {
		case *jobsetv1alpha2.JobSet:
			lw = jobSets
		case *corev1.Pod:
			lw = pods
		}
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
}

// decodingSerializer is client-go's serializer with decoders of its own:
// objects for the objects it reads, and envelope for the envelope of a
// watch stream in mediaType.
type decodingSerializer struct {
	runtime.NegotiatedSerializer
	mediaType string
	envelope  func(runtime.Serializer) runtime.Serializer
	objects   func(fallback runtime.Decoder) runtime.Decoder
}

func (s decodingSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := slices.Clone(s.NegotiatedSerializer.SupportedMediaTypes())
	for i := range infos {
		if infos[i].MediaType == s.mediaType && infos[i].StreamSerializer != nil {
			stream := *infos[i].StreamSerializer
			stream.Serializer = s.envelope(stream.Serializer)
			infos[i].StreamSerializer = &stream
		}
	}
	return infos
}

func (s decodingSerializer) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return s.objects(s.NegotiatedSerializer.DecoderToVersion(d, gv))
}

// jobSetSerializer is ns with jobSetDecoder for objects and
// watchEventDecoder for the envelope of a JSON watch stream.
func jobSetSerializer(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	return decodingSerializer{NegotiatedSerializer: ns, mediaType: runtime.ContentTypeJSON,
		envelope: func(s runtime.Serializer) runtime.Serializer { return watchEventDecoder{s} },
		objects:  func(fallback runtime.Decoder) runtime.Decoder { return jobSetDecoder{fallback: fallback} },
	}
}

var watchEventKind = metav1.SchemeGroupVersion.WithKind("WatchEvent")

// watchEventDecoder decodes a watch stream's envelope straight into the
// metav1.WatchEvent it is asked for; the object stays raw for the object's
// decoder. client-go's JSON serializer first scans the whole event with
// encoding/json for a kind the envelope does not have.
type watchEventDecoder struct {
	runtime.Serializer
}

func (d watchEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if e, ok := into.(*metav1.WatchEvent); ok {
		*e = metav1.WatchEvent{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, e); err == nil {
			return e, &watchEventKind, nil
		}
	}
	return d.Serializer.Decode(data, defaults, into)
}

var (
	jobSetKind     = jobsetv1alpha2.GroupVersion.WithKind("JobSet")
	jobSetListKind = jobsetv1alpha2.GroupVersion.WithKind("JobSetList")
)

// jobSetDecoder decodes a JobSet, or a list of them, without its pod
// templates; what is not a JobSet of this version, or does not decode,
// goes to fallback (client-go's decoder, whose errors users know). Like
// client-go's decoder it leaves the object's kind empty.
type jobSetDecoder struct {
	fallback runtime.Decoder
}

func (d jobSetDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	switch into := into.(type) {
	case *jobsetv1alpha2.JobSetList:
		var l thinJobSetList
		if kjson.UnmarshalCaseSensitivePreserveInts(data, &l) != nil || l.GroupVersionKind() != jobSetListKind {
			break
		}
		*into = jobsetv1alpha2.JobSetList{ListMeta: l.ListMeta}
		if l.Items != nil {
			into.Items = make([]jobsetv1alpha2.JobSet, len(l.Items))
			for i := range l.Items {
				l.Items[i].into(&into.Items[i])
			}
		}
		return into, &jobSetListKind, nil
	case *jobsetv1alpha2.JobSet:
		if decodeThinJobSet(data, into) {
			return into, &jobSetKind, nil
		}
	case nil:
		if js := (&jobsetv1alpha2.JobSet{}); decodeThinJobSet(data, js) {
			return js, &jobSetKind, nil
		}
	}
	return d.fallback.Decode(data, defaults, into)
}

// decodeThinJobSet fills js from data when data is a JobSet of this
// version, and leaves it as it was when not.
func decodeThinJobSet(data []byte, js *jobsetv1alpha2.JobSet) bool {
	var t thinJobSet
	if kjson.UnmarshalCaseSensitivePreserveInts(data, &t) != nil || t.GroupVersionKind() != jobSetKind {
		return false
	}
	t.into(js)
	return true
}

// thinJobSet is a JobSet as the manager's cache keeps it: every field but
// each replicated Job's pod template and the managedFields. A field
// declared at a shallower depth hides the embedded one of the same JSON
// name, so each level below declares only what it replaces; a field JobSet
// adds is kept without a change here.
type thinJobSet struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        thinObjectMeta              `json:"metadata,omitempty"`
	Spec            thinJobSetSpec              `json:"spec,omitempty"`
	Status          jobsetv1alpha2.JobSetStatus `json:"status,omitempty"`
}

// thinObjectMeta is a JobSet's metadata without its managedFields, which
// the cache drops from every object (a third of a JobSet's bytes).
type thinObjectMeta struct {
	metav1.ObjectMeta `json:",inline"`
	ManagedFields     skipped `json:"managedFields"`
}

type thinJobSetSpec struct {
	jobsetv1alpha2.JobSetSpec `json:",inline"`
	ReplicatedJobs            []thinReplicatedJob `json:"replicatedJobs,omitempty"`
}

type thinReplicatedJob struct {
	jobsetv1alpha2.ReplicatedJob `json:",inline"`
	Template                     thinJobTemplate `json:"template"`
}

type thinJobTemplate struct {
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              thinJobSpec `json:"spec,omitempty"`
}

type thinJobSpec struct {
	batchv1.JobSpec `json:",inline"`
	Template        skipped `json:"template"`
}

// skipped is a JSON value read past and never built.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

type thinJobSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []thinJobSet `json:"items"`
}

// into fills js from t, with an empty kind, no managedFields and empty pod
// templates.
func (t *thinJobSet) into(js *jobsetv1alpha2.JobSet) {
	*js = jobsetv1alpha2.JobSet{ObjectMeta: t.Metadata.ObjectMeta, Spec: t.Spec.JobSetSpec, Status: t.Status}
	if t.Spec.ReplicatedJobs == nil {
		return
	}
	js.Spec.ReplicatedJobs = make([]jobsetv1alpha2.ReplicatedJob, len(t.Spec.ReplicatedJobs))
	for i, r := range t.Spec.ReplicatedJobs {
		js.Spec.ReplicatedJobs[i] = r.ReplicatedJob
		js.Spec.ReplicatedJobs[i].Template = batchv1.JobTemplateSpec{ObjectMeta: r.Template.ObjectMeta, Spec: r.Template.Spec.JobSpec}
	}
}
