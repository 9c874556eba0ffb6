export { Calibration, CALIBRATE_QUEUE, labelsOf, type CalibrateJob, type CalibrationOptions } from './service';
export { calibrateInput } from './input';
