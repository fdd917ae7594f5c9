package diagnose

import "github.com/mpijob/mpijob/pkg/api"

// Warning statuses ask for a person's attention.
func Warning(s api.Status) bool {
	return s.Phase == api.PhaseFailed || s.Reason == ReasonImagePullFailed || s.Reason == ReasonQuotaExceeded || s.Reason == ReasonGangSchedulingTimeout ||
		s.Reason == ReasonPodsRefused || s.Reason == ReasonCannotStart || s.Reason == ReasonNoProgress || s.Reason == ReasonRankFailedOthersWaiting ||
		s.Reason == ReasonRankSilent || s.Reason == ReasonSlowRank || s.Reason == ReasonModelRegistrationFailed
}
