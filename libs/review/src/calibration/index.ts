export { labelOf, fieldOfFinding, fieldOfRule, sideOf, type LabelFacts, type FitField } from './labels';
export { widen, heldOutGain, putRight, isSure, type Band, type Point } from './fit';
export {
  calibrateProcedure,
  fitQuestion,
  MIN_LABELED_SESSIONS,
  MIN_FAILURES,
  type RefusalCode,
  type Refusal,
  type CalibrationRule,
  type CalibrationLabel,
  type ProcedureInput,
  type ProcedureFit,
  type RuleFit,
} from './calibrate';
