/**
 * The authoring API's answers as the Checks page reads them (docs/authoring.md): the api's own
 * types (type-only imports, erased from the bundle).
 */
export type {
  CheckProblem,
  DraftResult as CheckDraft,
  ListedCheck,
  PreviewResult as CheckPreview,
  PreviewRun,
  SavedCheck,
} from '@neatroots/api';
