import { Button, Modal, ModalBody, ModalFooter, ModalHeader } from '@patternfly/react-core';

/** Asks before a job is deleted: the job list's and the job page's Delete. */
export function DeleteJobModal({ job, onDelete, onClose }: {
  job: { namespace: string; name: string } | null;
  onDelete: () => void;
  onClose: () => void;
}) {
  return (
    <Modal isOpen={job !== null} onClose={onClose} variant="small" aria-labelledby="delete-title" data-testid="delete-modal">
      <ModalHeader title={`Delete ${job?.name}?`} labelId="delete-title" titleIconVariant="warning" />
      <ModalBody>The job, its Launcher and Workers and its logs are deleted from namespace {job?.namespace}. This cannot be undone.</ModalBody>
      <ModalFooter>
        <Button variant="danger" onClick={() => { onDelete(); onClose(); }} data-testid="delete-confirm">Delete</Button>
        <Button variant="link" onClick={onClose}>Cancel</Button>
      </ModalFooter>
    </Modal>
  );
}
