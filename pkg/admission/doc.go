// Package admission decides whether an MPI TrainJob may be created: pure
// validation with field paths (Validate…), the quota pre-flight arithmetic
// (CheckQuota) and admission warnings. The webhook adapter in this package
// only turns admission requests into calls of these functions.
package admission
