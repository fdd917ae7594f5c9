import { useState } from 'react';
import {
  Alert, Button, Checkbox, Form, FormGroup, FormHelperText, FormSelect, FormSelectOption, HelperText, HelperTextItem,
  Modal, ModalBody, ModalFooter, ModalHeader, TextInput,
} from '@patternfly/react-core';
import { registerModel } from '../../api/jobs';
import type { RegisterAnswer } from '../../api/types';

// The Artifacts tab's Register: the job's model goes to the model registry
// (OpenShift AI's Model Registry) as version VERSION of model NAME, as the
// user (kubectl mpijob register and the SDK's register_model do the same).
export function RegisterModelModal({ namespace, job, models, onClose }: {
  namespace: string; job: string; models: string[]; onClose: () => void;
}) {
  const [name, setName] = useState('');
  const [version, setVersion] = useState('');
  const [artifact, setArtifact] = useState(models.length === 1 ? models[0] : '');
  const [newModel, setNewModel] = useState(false);
  const [busy, setBusy] = useState(false);
  const [answer, setAnswer] = useState<(RegisterAnswer & { ok: boolean }) | null>(null);

  const submit = async (create = newModel, asName = name) => {
    setBusy(true);
    const got = await registerModel(namespace, job, { name: asName.trim(), version: version.trim(), artifact, newModel: create });
    setBusy(false);
    setAnswer(got);
  };
  const fieldError = (f: string) => (answer && !answer.ok && answer.field === f ? answer.error : '');
  const done = answer?.ok;

  return (
    <Modal isOpen onClose={onClose} variant="medium" aria-labelledby="register-title" data-testid="register-modal">
      <ModalHeader title={`Register the model of ${job}`} labelId="register-title"
        description="In the model registry, as you: the model file's URI, its format, the job's accuracy and loss, and where it came from." />
      <ModalBody>
        {done ? (
          <Alert variant={answer.unchanged ? 'info' : 'success'} isInline title={answer.message ?? 'Registered'} data-testid="register-done">
            {answer.uri}
          </Alert>
        ) : (
          <Form onSubmit={(e) => { e.preventDefault(); void submit(); }}>
            <FormGroup label="Model name" isRequired fieldId="register-name">
              <TextInput id="register-name" value={name} onChange={(_e, v) => setName(v)} isRequired data-testid="register-name"
                validated={fieldError('name') ? 'error' : 'default'} placeholder="digits-classifier" />
              <FormHelperText><HelperText><HelperTextItem variant={fieldError('name') ? 'error' : 'default'} data-testid="register-name-help">
                {fieldError('name') || 'Letters, digits, ".", "_" and "-".'}
              </HelperTextItem></HelperText></FormHelperText>
              {answer?.near && !done && (
                <Button variant="link" isInline onClick={() => { setName(answer.near ?? ''); void submit(false, answer.near ?? ''); }} data-testid="register-use-near">
                  Use {answer.near}
                </Button>
              )}
            </FormGroup>
            <FormGroup label="Version" fieldId="register-version">
              <TextInput id="register-version" value={version} onChange={(_e, v) => setVersion(v)} data-testid="register-version"
                validated={fieldError('version') ? 'error' : 'default'} placeholder={job} />
              <FormHelperText><HelperText><HelperTextItem variant={fieldError('version') ? 'error' : 'default'}>
                {fieldError('version') || `Default: the job's name, ${job}.`}
              </HelperTextItem></HelperText></FormHelperText>
            </FormGroup>
            {models.length > 1 && (
              <FormGroup label="Model file" fieldId="register-artifact">
                <FormSelect id="register-artifact" value={artifact} onChange={(_e, v) => setArtifact(v)} data-testid="register-artifact">
                  <FormSelectOption value="" label="Choose the model file" isPlaceholder />
                  {models.map((m) => <FormSelectOption key={m} value={m} label={m} />)}
                </FormSelect>
              </FormGroup>
            )}
            <Checkbox id="register-new" label="Create a new model, even if its name is close to a registered one" isChecked={newModel}
              onChange={(_e, v) => setNewModel(v)} data-testid="register-new" />
            {answer && !answer.ok && !answer.field && (
              <Alert variant="danger" isInline title="Nothing was registered" data-testid="register-error">
                {answer.error}
                {answer.command && <div>Later: <code>{answer.command}</code></div>}
              </Alert>
            )}
          </Form>
        )}
      </ModalBody>
      <ModalFooter>
        {done ? (
          <Button onClick={onClose} data-testid="register-close">Close</Button>
        ) : (
          <>
            <Button onClick={() => void submit()} isDisabled={busy || !name.trim()} isLoading={busy} data-testid="register-submit">Register</Button>
            <Button variant="link" onClick={onClose}>Cancel</Button>
          </>
        )}
      </ModalFooter>
    </Modal>
  );
}
