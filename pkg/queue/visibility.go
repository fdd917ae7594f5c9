package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/client-go/rest"
)

// Pending is one Workload as Kueue's visibility API lists it: in Kueue's
// own order, with 0-based positions.
type Pending struct {
	Namespace, Name        string
	LocalQueueName         string
	PositionInClusterQueue int32
	PositionInLocalQueue   int32
}

// pendingWorkload is the wire form (visibility.kueue.x-k8s.io/v1beta2
// PendingWorkload).
type pendingWorkload struct {
	Metadata struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
	LocalQueueName         string `json:"localQueueName"`
	PositionInClusterQueue int32  `json:"positionInClusterQueue"`
	PositionInLocalQueue   int32  `json:"positionInLocalQueue"`
}

// PendingLister lists a ClusterQueue's pending Workloads in Kueue's order.
type PendingLister interface {
	PendingInClusterQueue(ctx context.Context, clusterQueue string) ([]Pending, error)
}

// visibilityPage is how many Workloads one request asks for (Kueue's
// default limit).
const visibilityPage = 1000

// visibilityMaxPages bounds the reads for one ClusterQueue: Workloads past
// visibilityPage × visibilityMaxPages get the computed position.
const visibilityMaxPages = 10

// Visibility asks Kueue's on-demand visibility API
// (visibility.kueue.x-k8s.io/v1beta2, served by Kueue through the API
// aggregation layer) for pending Workloads. It reads the JSON itself, so
// mpijob depends on Kueue's API, not on its Go module.
type Visibility struct {
	// REST is any client of the API server (e.g. a clientset's
	// Discovery().RESTClient()); requests use absolute paths.
	REST rest.Interface
}

// PendingInClusterQueue reads every page of the ClusterQueue's pending
// Workloads, up to visibilityMaxPages.
func (v Visibility) PendingInClusterQueue(ctx context.Context, clusterQueue string) ([]Pending, error) {
	var out []Pending
	for page := 0; page < visibilityMaxPages; page++ {
		raw, err := v.REST.Get().
			AbsPath("/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues", clusterQueue, "pendingworkloads").
			Param("limit", strconv.Itoa(visibilityPage)).
			Param("offset", strconv.Itoa(page*visibilityPage)).
			DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		var summary struct {
			Items []pendingWorkload `json:"items"`
		}
		if err := json.Unmarshal(raw, &summary); err != nil {
			return nil, fmt.Errorf("reading Kueue's pending workloads of ClusterQueue %s: %w", clusterQueue, err)
		}
		for _, it := range summary.Items {
			out = append(out, Pending{Namespace: it.Metadata.Namespace, Name: it.Metadata.Name, LocalQueueName: it.LocalQueueName,
				PositionInClusterQueue: it.PositionInClusterQueue, PositionInLocalQueue: it.PositionInLocalQueue})
		}
		if len(summary.Items) < visibilityPage {
			break
		}
	}
	return out, nil
}
