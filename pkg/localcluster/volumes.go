package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// SharedClaim is the ReadWriteMany PersistentVolumeClaim every tenant
// namespace of the local cluster gets, for jobs that read and write a
// shared file system (`--pvc shared-data`).
const SharedClaim = "shared-data"

// sharedStorageClass names the local cluster's shared volumes.
const sharedStorageClass = "local-shared"

// sharedCapacity is each tenant's shared volume.
var sharedCapacity = resource.MustParse("5Gi")

// startSharedVolumes gives every tenant namespace a ReadWriteMany volume
// and its claim: a folder of this machine, which both real nodes' kubelets
// mount (they share the host's file system, as the nodes of a real cluster
// share an NFS or CephFS volume). The folder belongs to the images' user
// (uid 1000), and is wiped at every start.
func (c *Cluster) startSharedVolumes(ctx context.Context) error {
	cl, err := c.newClient()
	if err != nil {
		return err
	}
	for _, ns := range tenantNamespaces() {
		dir := c.opts.path("volumes", ns)
		if err := os.MkdirAll(dir, 0o770); err != nil {
			return err
		}
		if err := os.Chown(dir, 1000, 1000); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		pv := &corev1.PersistentVolume{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
			ObjectMeta: metav1.ObjectMeta{Name: "shared-" + ns, Labels: map[string]string{"mpijob.dev/local-volume": ns}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: sharedCapacity},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              sharedStorageClass,
				ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: SharedClaim},
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)},
				},
			},
		}
		pvc := &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: SharedClaim, Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				StorageClassName: ptr.To(sharedStorageClass),
				VolumeName:       pv.Name,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: sharedCapacity}},
			},
		}
		if err := applyObject(ctx, cl, pv); err != nil {
			return fmt.Errorf("failed to create volume %s: %w", pv.Name, err)
		}
		if err := applyObject(ctx, cl, pvc); err != nil {
			return fmt.Errorf("failed to create claim %s/%s: %w", ns, SharedClaim, err)
		}
	}
	return nil
}
