// The dashboard API's JSON (dashboard/jobs.go), in the words of the CLI and SDK.
export type Phase =
  | 'Pending'
  | 'Queued'
  | 'GangScheduling'
  | 'Starting'
  | 'Running'
  | 'Succeeded'
  | 'Failed'
  | 'Suspended';

export interface Job {
  /** A queued job's estimated start, and how it was worked out. */
  estimate?: { start?: string; basis: string };
  name: string;
  namespace: string;
  runtime: string;
  mpi: boolean;
  phase: Phase;
  reason?: string;
  message?: string;
  nextStep?: string;
  nextSteps?: string[];
  queuePosition?: number;
  launcher?: string;
  workersReady: number;
  workersTotal: number;
  slotsPerWorker: number;
  creator?: string;
  created: string;
  started?: string;
  finished?: string;
  transitioned?: string;
  suspended: boolean;
  deleting?: boolean;
  /** The Launcher and Workers that failed, as the diagnosis names them (status.failed). */
  failed?: FailedPod[];
  /** The last progress the ranks reported (OpenShift AI's trainerStatus); absent when none. */
  progress?: TrainerStatus;
}

/** A job's progress as mpijob-manager publishes it (annotation trainer.opendatahub.io/trainerStatus). */
export interface TrainerStatus {
  progressPercentage?: number | null;
  estimatedRemainingSeconds?: number;
  estimatedRemainingTimeSummary?: string;
  currentStep?: number;
  totalSteps?: number;
  currentEpoch?: number;
  totalEpochs?: number;
  trainMetrics?: Record<string, number>;
  lastUpdatedTime?: string;
}

/** One progress report read from the Launcher's log (docs/progress.md). */
export interface ProgressPoint {
  time?: string;
  epoch?: number;
  total_epochs?: number;
  step?: number;
  total_steps?: number;
  loss?: number;
  accuracy?: number;
  eta_seconds?: number;
  metrics?: Record<string, number>;
}

export interface ArtifactList {
  connection?: string;
  claim?: string;
  uri?: string;
  objects: { name: string; size: number; lastModified: string }[];
  message?: string;
}

export interface FailedPod {
  role: 'launcher' | 'worker';
  index: number;
  pod?: string;
  node?: string;
  reason: string;
}

export interface Pod {
  name: string;
  role: 'launcher' | 'worker';
  index: number;
  node?: string;
  phase: string;
  ready: boolean;
  restarts: number;
  state: string;
  detail?: string;
  started?: string;
  health: 'green' | 'yellow' | 'red' | 'grey';
  image?: string;
  /** The job no longer has this pod; state is its last, as the status kept it. */
  gone?: boolean;
}

export interface Resources {
  workers: number;
  slotsPerWorker: number;
  worker: Record<string, string>;
  launcher: Record<string, string>;
  total: Record<string, string>;
  summary: string;
  workerImage?: string;
  launcherImage?: string;
}

export interface Detail {
  job: Job;
  pods: Pod[];
  /** While mpijob-manager is not running: the status may be stale, and how old it is. */
  staleNote?: string;
  /** The job's transitions as its status kept them (after the cluster's Events expire). */
  history?: Transition[];
  resources?: Resources;
  yaml: string;
  runtimeKind: string;
}

export interface Transition {
  time: string;
  phase: string;
  reason?: string;
  message?: string;
}

export interface KEvent {
  time: string;
  type: string;
  reason: string;
  object: string;
  message: string;
  count: number;
  /** Says it comes from mpijob-manager, but the manager does not vouch for it. */
  forged?: boolean;
}

export interface Namespace {
  name: string;
  canDelete: boolean;
  canPatch: boolean;
  canCreate: boolean;
  canLogs: boolean;
}

/** What mpijob-manager's Lease says (GET /api/manager). */
export interface Manager {
  running: boolean;
  since?: string;
  note?: string;
}

/** A job's resource use over its life (GET /api/jobs/{ns}/{name}/metrics). */
export interface Metrics {
  start: string;
  end: string;
  step: number;
  series: MetricSeries[];
  phases: PhaseBand[];
  how: string;
}

export interface MetricSeries {
  metric: 'cpu' | 'memory' | 'gpu';
  pod: string;
  role: 'Launcher' | 'Worker';
  /** [unix seconds, value] */
  points: [number, number][];
}

export interface PhaseBand {
  phase: Phase;
  start: string;
  end: string;
}
