package api

import corev1 "k8s.io/api/core/v1"

// What the local cluster's image builder records on a pod whose image it
// builds for its first use, and the diagnosis reads (ImageBuilding): the
// Events' source and reasons, spelled once for both sides.
const (
	// ImageBuilderComponent is the source of the image builder's Events.
	ImageBuilderComponent = "mpijob-dev-image-builder"
	// EventBuildingImage: the build of the pod's image has begun.
	EventBuildingImage = "BuildingImage"
	// EventImageBuilt: the image is built and imported into every node.
	EventImageBuilt = "ImageBuilt"
	// EventImageBuildFailed: the build failed; it is retried with back-off.
	EventImageBuildFailed = "ImageBuildFailed"
	// EventGPUImageNotLocal: a pod on a real node (no GPU) uses a GPU image,
	// which the local cluster does not import; the pod cannot start there.
	EventGPUImageNotLocal = "GPUImageNotLocal"
)

// LastBuilderEvent is the image builder's last Event on pod (nil when it
// recorded none): BuildingImage while it builds, then ImageBuilt or
// ImageBuildFailed. The diagnosis and the runtimes test read it.
func LastBuilderEvent(events []corev1.Event, pod string) *corev1.Event {
	var last *corev1.Event
	for i := range events {
		e := &events[i]
		if e.Source.Component != ImageBuilderComponent || e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Name != pod {
			continue
		}
		if last == nil || EventTime(*e).After(EventTime(*last)) {
			last = e
		}
	}
	return last
}
