package main

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/mpijob/mpijob/pkg/diagnose"
)

// The manager's cache watches every pod of the cluster, the largest of
// its watch streams: a Worker is about 32 kB as sent, of which the cache
// keeps a few (diagnose.TrimPod). After the JobSets' decoder (jobSetWatch)
// the pods were the largest decoding left in the leader's profile, and the
// protobuf watch copies each event twice before decoding it: the envelope
// copies the object out of the stream's buffer (RawExtension), and the
// object's own envelope copies it again (runtime.Unknown), about a fifth
// of the leader's allocations at 200 × 8 (docs/development.md).
//
// The pods' informer lists and watches through its own REST client whose
// decoder:
//   - reads a watch event's envelope in place, the object left in the
//     stream's buffer (the object is decoded, and every byte it keeps
//     copied, before the stream reads its next event);
//   - reads a pod's envelope in place too, and hands the generated
//     decoder the pod without the fields TrimPod drops (podFields), so
//     that they are stepped over on the wire and never built.
//
// What TrimPod keeps is decoded by the pod's own generated code, and
// TrimPod still runs on the result. Anything else the API server sends (a
// Status, an object of another kind or version, JSON, malformed data) goes
// to client-go's decoder, as before.

// podWatch lists and watches the cluster's pods for the manager's cache, in
// protobuf, as controller-runtime's own ListWatch does (bookmarks on; the
// cache has no namespace or selector restriction for pods, and one added
// must be added here too).
func podWatch(cfg *rest.Config, scheme *runtime.Scheme) (*toolscache.ListWatch, error) {
	return listWatch(cfg, scheme, corev1.SchemeGroupVersion, "/api", runtime.ContentTypeProtobuf,
		runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON, podSerializer,
		"pods", func() runtime.Object { return &corev1.PodList{} })
}

// podSerializer is ns with podDecoder for objects and
// protoWatchEventDecoder for the envelope of a protobuf watch stream.
func podSerializer(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	return decodingSerializer{NegotiatedSerializer: ns, mediaType: runtime.ContentTypeProtobuf,
		envelope: func(s runtime.Serializer) runtime.Serializer { return protoWatchEventDecoder{s} },
		objects:  func(fallback runtime.Decoder) runtime.Decoder { return podDecoder{fallback: fallback} },
	}
}

// protoWatchEventDecoder reads a protobuf watch event's envelope into the
// metav1.WatchEvent it is asked for without copying the object: its Raw is
// data's own bytes, valid until the stream reads the next event (client-go
// decodes the object before it does). Anything it cannot read goes to
// client-go's decoder.
type protoWatchEventDecoder struct {
	runtime.Serializer
}

func (d protoWatchEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if e, ok := into.(*metav1.WatchEvent); ok {
		if typ, raw, ok := readWatchEvent(data); ok {
			*e = metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
			return e, &watchEventKind, nil
		}
	}
	return d.Serializer.Decode(data, defaults, into)
}

// readWatchEvent reads a metav1.WatchEvent (1: type; 2: object, a
// RawExtension whose 1 is its bytes) without copying the object.
func readWatchEvent(data []byte) (typ string, raw []byte, ok bool) {
	ok = eachField(data, func(num protowire.Number, wire protowire.Type, v []byte) bool {
		if wire != protowire.BytesType {
			return false
		}
		switch num {
		case 1:
			typ = string(v)
		case 2:
			return eachField(v, func(num protowire.Number, wire protowire.Type, v []byte) bool {
				if num == 1 && wire == protowire.BytesType {
					raw = v
				}
				return true
			})
		}
		return true
	})
	return typ, raw, ok && typ != ""
}

var (
	podKind     = corev1.SchemeGroupVersion.WithKind("Pod")
	podListKind = corev1.SchemeGroupVersion.WithKind("PodList")
	protoMagic  = []byte{0x6b, 0x38, 0x73, 0x00} // "k8s\0", protobuf.NewSerializer's prefix
)

// podDecoder decodes a protobuf pod, or a list of them, without what
// TrimPod drops; what is not one of those, or does not decode, goes to
// fallback (client-go's decoder, whose errors users know). Like client-go's
// decoder it leaves the object's kind empty.
type podDecoder struct {
	fallback runtime.Decoder
}

func (d podDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	switch into := into.(type) {
	case *corev1.PodList:
		if decodeThin(data, podListKind, podListFields, into) {
			return into, &podListKind, nil
		}
	case *corev1.Pod:
		if decodeThin(data, podKind, podFields, into) {
			return into, &podKind, nil
		}
	case nil:
		if p := (&corev1.Pod{}); decodeThin(data, podKind, podFields, p) {
			return p, &podKind, nil
		}
	}
	return d.fallback.Decode(data, defaults, into)
}

// protoObject is a generated protobuf message of the Kubernetes API.
type protoObject interface {
	Reset()
	Unmarshal([]byte) error
}

// filtered holds the buffers of the messages decodeThin builds, one per
// decoding at a time.
var filtered = sync.Pool{New: func() any { return new([]byte) }}

// decodeThin fills obj from data when data is a protobuf object of kind
// (the "k8s\0" prefix, then a runtime.Unknown: 1 its type, 2 its bytes, 3
// its encoding) without the fields that fields drops, and reports whether it
// did. A false leaves obj to be reset by the fallback.
func decodeThin(data []byte, kind schema.GroupVersionKind, fields protoFields, obj protoObject) bool {
	if !bytes.HasPrefix(data, protoMagic) {
		return false
	}
	var apiVersion, gotKind, encoding string
	var raw []byte
	if !eachField(data[len(protoMagic):], func(num protowire.Number, typ protowire.Type, v []byte) bool {
		if typ != protowire.BytesType {
			return false
		}
		switch num {
		case 1:
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) bool {
				switch {
				case typ != protowire.BytesType:
					return false
				case num == 1:
					apiVersion = string(v)
				case num == 2:
					gotKind = string(v)
				}
				return true
			})
		case 2:
			raw = v
		case 3:
			encoding = string(v)
		}
		return true
	}) || apiVersion != kind.GroupVersion().String() || gotKind != kind.Kind || encoding != "" {
		return false
	}
	buf := filtered.Get().(*[]byte)
	defer filtered.Put(buf)
	var ok bool
	if *buf, ok = filter((*buf)[:0], raw, fields); !ok {
		return false
	}
	obj.Reset()
	return obj.Unmarshal(*buf) == nil
}

// protoFields says what to do with some fields of one protobuf message, by
// number; a field it does not name is kept as it is.
type protoFields map[protowire.Number]protoField

// protoField is one field's rule: dropped, or, for a message (each one of
// a repeated field), kept only when keep says so and filtered by in.
type protoField struct {
	drop bool
	keep func([]byte) bool
	in   protoFields
}

var dropped = protoField{drop: true}

// The fields of a pod that the cache drops (diagnose.TrimJobSetPod; a pod
// of no JobSet keeps less still, diagnose.CapacityPod), by their numbers in
// k8s.io/api/core/v1/generated.proto. TestPodDecoderKeepsWhatTheCacheKeeps
// holds what is left, after TrimPod, to client-go's whole pod after TrimPod.
var (
	podFields = protoFields{
		1: {in: protoFields{ // ObjectMeta
			11: {keep: mapKeyIn(diagnose.KeptPodLabels)}, // labels
			12: {keep: mapKeyIn(podAnnotations)},         // annotations
			17: dropped,                                  // managedFields
		}},
		2: {in: protoFields{ // PodSpec
			1:  {keep: claimVolume},                       // volumes: only PersistentVolumeClaims
			2:  {in: containerFields},                     // containers
			20: {in: containerFields},                     // initContainers
			14: dropped,                                   // securityContext
			18: {in: protoFields{2: dropped, 3: dropped}}, // affinity: only to nodes
		}},
		3: {in: protoFields{ // PodStatus
			8:  {in: containerStatusFields}, // containerStatuses
			10: {in: containerStatusFields}, // initContainerStatuses
			13: {in: containerStatusFields}, // ephemeralContainerStatuses
			12: dropped,                     // podIPs
			16: dropped,                     // hostIPs
			19: dropped,                     // allocatedResources
			20: dropped,                     // resources
		}},
	}
	// Container: ports, env, volumeMounts, livenessProbe, lifecycle,
	// securityContext, envFrom, volumeDevices, startupProbe.
	containerFields = protoFields{6: dropped, 7: dropped, 9: dropped, 10: dropped, 12: dropped, 15: dropped, 19: dropped, 21: dropped, 22: dropped}
	// ContainerStatus: imageID, containerID, allocatedResources, resources,
	// volumeMounts, user, allocatedResourcesStatus.
	containerStatusFields = protoFields{7: dropped, 8: dropped, 10: dropped, 11: dropped, 12: dropped, 13: dropped, 14: dropped}
	// PodList: 2, its pods.
	podListFields = protoFields{2: {in: podFields}}
)

// podAnnotations are the annotations of a pod the decoder keeps: those the
// cache keeps, and the one that marks a watch's initial events as sent (on
// a bookmark: the informer's reflector reads it before any transform, and
// waits for it when it lists by watching).
var podAnnotations = append([]string{metav1.InitialEventsAnnotationKey}, diagnose.KeptPodAnnotations...)

// mapKeyIn keeps a map's entry (1: its key) whose key is one of keys.
func mapKeyIn(keys []string) func([]byte) bool {
	return func(entry []byte) bool {
		keep := false
		eachField(entry, func(num protowire.Number, typ protowire.Type, v []byte) bool {
			if num == 1 && typ == protowire.BytesType {
				keep = slices.Contains(keys, string(v))
			}
			return true
		})
		return keep
	}
}

// claimVolume keeps a Volume (2: its source) whose source is a
// PersistentVolumeClaim (10).
func claimVolume(volume []byte) bool {
	claim := false
	eachField(volume, func(num protowire.Number, typ protowire.Type, v []byte) bool {
		if num == 2 && typ == protowire.BytesType {
			eachField(v, func(num protowire.Number, typ protowire.Type, _ []byte) bool {
				claim = claim || num == 10
				return true
			})
		}
		return true
	})
	return claim
}

// nextField reads the first field of the protobuf message data: its
// number and wire type, its value (a length-delimited field's contents,
// another field's encoded value), the whole field as encoded, and what
// follows it; ok is false where data is not well formed.
func nextField(data []byte) (num protowire.Number, typ protowire.Type, value, whole, rest []byte, ok bool) {
	num, typ, n := protowire.ConsumeTag(data)
	if n < 0 {
		return 0, 0, nil, nil, nil, false
	}
	m := protowire.ConsumeFieldValue(num, typ, data[n:])
	if m < 0 {
		return 0, 0, nil, nil, nil, false
	}
	value = data[n : n+m]
	if typ == protowire.BytesType {
		value, _ = protowire.ConsumeBytes(value)
	}
	return num, typ, value, data[:n+m], data[n+m:], true
}

// eachField calls f with each field of the protobuf message data (its
// value as nextField reads it) until f says stop, and reports whether data
// was well formed and f never stopped.
func eachField(data []byte, f func(protowire.Number, protowire.Type, []byte) bool) bool {
	for len(data) > 0 {
		num, typ, v, _, rest, ok := nextField(data)
		if !ok || !f(num, typ, v) {
			return false
		}
		data = rest
	}
	return true
}

// filter appends to dst the message src without the fields that fields drops,
// and reports whether src was well formed. A kept message is written with
// its length first: the room the unfiltered length takes is kept, and the
// message moved back if its filtered length takes less.
func filter(dst, src []byte, fields protoFields) ([]byte, bool) {
	for len(src) > 0 {
		num, typ, v, whole, rest, ok := nextField(src)
		if !ok {
			return dst, false
		}
		src = rest
		f, named := fields[num]
		switch {
		case !named:
			dst = append(dst, whole...)
			continue
		case f.drop:
			continue
		case typ != protowire.BytesType:
			// Not the message generated.proto says: left for the
			// generated decoder to refuse.
			dst = append(dst, whole...)
			continue
		case f.keep != nil && !f.keep(v):
			continue
		case f.in == nil:
			dst = append(dst, whole...)
			continue
		}
		dst = protowire.AppendTag(dst, num, typ)
		at := len(dst)
		dst = protowire.AppendVarint(dst, uint64(len(v)))
		start := len(dst)
		if dst, ok = filter(dst, v, f.in); !ok {
			return dst, false
		}
		size := len(dst) - start
		var length [binary.MaxVarintLen64]byte
		l := protowire.AppendVarint(length[:0], uint64(size))
		if len(l) < start-at {
			copy(dst[at+len(l):], dst[start:])
			dst = dst[:at+len(l)+size]
		}
		copy(dst[at:], l)
	}
	return dst, true
}
