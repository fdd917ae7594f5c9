import { Label } from '@patternfly/react-core';
import {
  BanIcon,
  CheckCircleIcon,
  ExclamationCircleIcon,
  HourglassHalfIcon,
  InProgressIcon,
  ListIcon,
  PauseCircleIcon,
  UsersIcon,
} from '@patternfly/react-icons';
import type { Phase } from '../api/types';
import { phaseLabel } from '../lib/format';

type Color = 'blue' | 'purple' | 'orange' | 'teal' | 'green' | 'red' | 'grey';

// Seed 002: green = Running, red = Failed, blue = Pending.
const look: Record<Phase, { color: Color; icon: JSX.Element }> = {
  Pending: { color: 'blue', icon: <HourglassHalfIcon /> },
  Queued: { color: 'purple', icon: <ListIcon /> },
  GangScheduling: { color: 'orange', icon: <UsersIcon /> },
  Starting: { color: 'teal', icon: <InProgressIcon /> },
  Running: { color: 'green', icon: <InProgressIcon /> },
  Succeeded: { color: 'green', icon: <CheckCircleIcon /> },
  Failed: { color: 'red', icon: <ExclamationCircleIcon /> },
  Suspended: { color: 'grey', icon: <PauseCircleIcon /> },
};

export function PhaseBadge({ phase, queuePosition }: { phase: Phase; queuePosition?: number }) {
  const l = look[phase] ?? { color: 'grey' as Color, icon: <BanIcon /> };
  return (
    <Label color={l.color} icon={l.icon} data-testid="phase" data-phase={phase}>
      {phaseLabel(phase, queuePosition)}
    </Label>
  );
}
