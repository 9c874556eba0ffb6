/**
 * @neatroots/sop: procedures as files (sopc's parser and compiler, lock.json), the status and
 * result rules of a procedure check, and the checker behind a Decider port.
 */
export * from './types';
export { ruleId, contentVersion, collapse } from './ids';
export { splitAnnotation, type Annotation } from './annotations';
export { parseProcedure, type ParsedProcedure } from './procedure';
export { parseAgentFile, parseGroupFile, type AgentFile, type GroupFile, type Ref } from './yaml-files';
export { compileFiles, compileFolder, readFolder, FolderError, NAME_PATTERN } from './compile';
export { compileInstructions } from './instructions';
export { toLock, lockText, type Lock, type LockAgent, type LockProcedure, type LockRule } from './lock';
